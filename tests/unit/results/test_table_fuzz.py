"""Damaged and hostile results tables (issue 35): hypothesis builds tables with columns missing, extra or of
the wrong type, and NaN, infinite, zero and negative values where figures go, and writes them as
results.parquet and as row.json copies. report, rebuild, compare and history answer each with 0, 1 or 2
(a one-line error), never a traceback."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.cli import main as cli
from harness.results import table as results

FLOAT_FIGURES = ["throughput", "plain_throughput", "window_s", "step_time_p50_s", "bytes_per_step", "final_accuracy",
                 "target_accuracy", "peak_rss_mb", "cpu_util_pct", "first_loss", "last_loss"]
INT_FIGURES = ["samples_measured", "world_size", "procs_per_node", "nodes", "batch_per_worker", "global_batch",
               "repeat", "steps_to_target", "parameters"]
FIGURES = FLOAT_FIGURES + INT_FIGURES
ODD_FLOATS = st.sampled_from([0.0, math.nan, 3.0, 1e308, 5e-324, -0.0, -1.0, math.inf, -math.inf])  # last 3 refused
ODD_INTS = st.sampled_from([0, 1, 7, 2**62, -1])  # -1 refused where a count is meant
STEP_LISTS = st.sampled_from(["[]", "[0, 0, 0]", "[NaN, 0.1]", "[Infinity]", "[-0.1, 0.1]", "not json", "{}",
                              "[0.1, 0.11, 0.12]", "[1e308, 1e308]", None])
TEXT = st.text(max_size=12)


def _base(i: int, sweep: int) -> dict:
    return {"schema_version": results.SCHEMA_VERSION, "sweep_id": f"s{sweep}", "run_id": f"s{sweep}/{i:04d}",
            "config_id": f"c{i % 2}", "scenario": "fuzz", "framework": "torch_ddp", "workload": "resnet50",
            "size": "tiny", "nodes": 1, "procs_per_node": 1 + i % 2, "world_size": 1 + i % 2, "batch_per_worker": 2,
            "global_batch": 2, "strategy": "allreduce", "storage": "synthetic", "launcher": "torchrun",
            "network": "unlimited", "precision": "fp32", "memory_format": "contiguous", "compile": "off",
            "device_requested": "cpu", "device": "cpu", "sample_unit": "images", "repeat": i // 2, "status": "ok",
            "throughput": 100.0 + i, "step_times_s": json.dumps([0.02, 0.021, 0.019]), "timestamp": f"t{sweep}{i}",
            "cpu_model": "cpu", "cpu_cores": 2, "host": "h"}


@st.composite
def tables(draw) -> pd.DataFrame:
    rows = [_base(i, sweep) for sweep in range(draw(st.integers(1, 4))) for i in range(draw(st.integers(1, 4)))]
    cells = st.tuples(st.integers(0, len(rows) - 1), st.sampled_from([*FIGURES, "step_times_s", "status"]))
    for i, column in draw(st.lists(cells, max_size=5)):  # a few odd cells per table
        rows[i][column] = draw(ODD_FLOATS if column in FLOAT_FIGURES else ODD_INTS if column in INT_FIGURES
                               else STEP_LISTS if column == "step_times_s"
                               else st.sampled_from(["failed", "timeout", "diverged", "skipped", "weird", None]))
    frame = pd.DataFrame(rows)
    for column in draw(st.lists(st.sampled_from(list(frame.columns)), max_size=2, unique=True)):
        frame = frame.drop(columns=column)  # missing columns (schema_version among them)
    damage = draw(st.sampled_from([None, None, None, "extra", "type", "ids"]))  # most tables load
    if damage == "extra":
        frame["not_a_column"] = 1
    elif damage == "type":
        column = draw(st.sampled_from([c for c in FIGURES if c in frame.columns] or ["throughput"]))
        frame[column] = draw(st.sampled_from(["fast", "1,5", "", "[]"]))
    elif damage == "ids":
        frame["sweep_id"] = draw(TEXT)  # ids from nowhere: paths, control characters, empty
    return frame


def _write(frame: pd.DataFrame, out) -> None:
    out.mkdir(parents=True, exist_ok=True)
    try:
        frame.to_parquet(out / results.PARQUET, index=False)
    except Exception:  # noqa: BLE001 - a frame pyarrow itself cannot write is no case
        frame.astype(str).to_parquet(out / results.PARQUET, index=False)
    for i, row in enumerate(frame.to_dict("records")):
        folder = out / "runs" / "fuzz" / f"{i:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "row.json").write_text(json.dumps(row, default=str))


def _answers(argv: list[str], capsys) -> int:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code in (0, 1, 2), (argv, code)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("rosetta"), err
    return code


FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])


@FUZZ
@given(frame=tables())
def test_report_answers_any_table(frame, tmp_path_factory, capsys):
    out = tmp_path_factory.mktemp("report")
    _write(frame, out)
    _answers(["report", "--results", str(out), "--sweep", "all"], capsys)


@FUZZ
@given(frame=tables())
def test_compare_and_history_answer_any_table(frame, tmp_path_factory, capsys):
    out = tmp_path_factory.mktemp("compare")
    _write(frame, out)
    _answers(["compare", str(out), str(out / results.PARQUET), "--baseline-sweep", "all", "--current-sweep", "all"],
             capsys)
    _answers(["history", str(out), "--no-chart"], capsys)


@FUZZ
@given(frame=tables())
def test_rebuild_answers_any_rows_and_reports_what_it_made(frame, tmp_path_factory, capsys):
    out = tmp_path_factory.mktemp("rebuild")
    _write(frame, out)
    if _answers(["rebuild", "--results", str(out)], capsys) == 0:
        _answers(["report", "--results", str(out), "--sweep", "all"], capsys)


@pytest.mark.parametrize("value", [0.0, math.nan, math.inf])
@pytest.mark.parametrize("column", ["throughput", "plain_throughput"])
def test_report_of_zero_nan_or_infinite_throughput_answers(column, value, tmp_path, capsys):
    """The probe's reproductions (ZeroDivisionError, AttributeError)."""
    rows = [{**_base(i, 0), column: value} for i in range(4)]
    results.append(tmp_path, rows)
    assert _answers(["report", "--results", str(tmp_path)], capsys) in (0, 2)


@pytest.mark.parametrize("steps", ["[]", "[0, 0, 0]"])
def test_empty_or_zero_step_lists_answer(steps, tmp_path, capsys):
    rows = [{**_base(i, s), "step_times_s": steps} for s in range(3) for i in range(2)]
    results.append(tmp_path, rows)
    assert _answers(["report", "--results", str(tmp_path)], capsys) in (0, 2)
    assert _answers(["compare", str(tmp_path), str(tmp_path)], capsys) in (0, 1, 2)
    assert _answers(["history", str(tmp_path), "--no-chart"], capsys) in (0, 1, 2)
