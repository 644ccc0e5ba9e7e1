"""Hardening found by an outside probe (issue 23): bounded inputs, files others can read, wording that
counts right, reports that follow from the rows, exit statuses a CI can gate on, charts a person reads right."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import typing
import xml.etree.ElementTree as ET

import pandas as pd
import pytest

import frameworks
from harness import launchers
from harness.base.errors import UserError
from harness.cli import main as cli
from harness.contract.events import RankRecord
from harness.experiment import scenario, strategies
from harness.reports import aggregate, charts, notebook
from harness.results import table as results
from harness.running import collect
from harness.storage.backends import StorageOptions
from tests.conftest import TINY

MINIMAL = {"matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny"}}


def _parse(**tables) -> scenario.Scenario:
    doc = {k: dict(v) for k, v in MINIMAL.items()}
    for name, table in tables.items():
        doc[name] = {**doc.get(name, {}), **table}
    return scenario.parse(doc, "s.toml")


# ------------------------------------------------------------------ bounds


def _numeric_fields(cls) -> list[dataclasses.Field]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        item = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
        if item in (int, float):
            out.append(f)
    return out


SCENARIO_TABLES = [scenario.RunSettings, scenario.Matrix, StorageOptions,
                   *(launchers.module(name).Options for name in launchers.names()),
                   *strategies.OPTIONS.values()]


@pytest.mark.parametrize("cls", SCENARIO_TABLES, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_numeric_scenario_option_has_a_lower_and_an_upper_bound(cls):
    for f in _numeric_fields(cls):
        assert "min" in f.metadata and "max" in f.metadata, f"{cls.__name__}.{f.name} is unbounded"


@pytest.mark.parametrize("repeats", [1_000_000, 2**63 - 1, 10**20])
def test_huge_repeats_are_refused_at_once_in_one_line(repeats):
    start = time.monotonic()
    with pytest.raises(UserError, match=r"^s.toml: \[settings\] repeats: must be <= 1000") as info:
        _parse(settings={"repeats": repeats})
    assert time.monotonic() - start < 1 and "\n" not in str(info.value)


def test_a_matrix_past_the_limit_is_refused_before_expanding_with_its_count():
    start = time.monotonic()
    with pytest.raises(UserError, match=r"expands to 500,000 runs .*100 batch_per_worker.* x 1000 repeats.*at most "
                                        r"10,000") as info:
        _parse(settings={"repeats": 1000}, matrix={"batch_per_worker": list(range(1, 101)),
                                                   "procs_per_node": [1, 2, 3, 4, 5]})
    assert time.monotonic() - start < 1 and "\n" not in str(info.value)
    _parse(settings={"repeats": 100}, matrix={"batch_per_worker": list(range(1, 101))})  # 10,000: allowed


@pytest.mark.parametrize("table, key, value", [
    ("matrix", "procs_per_node", 100_000), ("matrix", "nodes", 10**9), ("settings", "timeout_s", 1e300),
    ("settings", "seed", 2**64), ("matrix", "batch_per_worker", 10**7)])
def test_numbers_past_their_bound_are_refused(table, key, value):
    with pytest.raises(UserError, match=rf"\[{table}\] {key}: must be <= "):
        _parse(**{table: {key: value}})


def test_workload_options_are_bounded():
    with pytest.raises(UserError, match=r"image_size: must be <= 1000000"):
        scenario.parse({**MINIMAL, "workload_options": {"resnet50": {"image_size": 10**12}}}, "s.toml")


def test_plan_interrupted_does_not_claim_a_run_was_recorded(monkeypatch, capsys):
    from harness.reports import plan

    def interrupted(_spec):
        raise KeyboardInterrupt  # Ctrl-C while the plan is being made

    # where the plan calls it (patching harness.running.runner's name missed a module imported before, and a
    # plan imported during the patch kept the raising function for every later test)
    monkeypatch.setattr(plan, "skip_reason", interrupted)
    assert cli.main(["plan"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "recorded" not in err


# ------------------------------------------------------------------ files and wording


def test_a_scenario_starting_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + b'name = "bom"\n[matrix]\nframework = "torch_ddp"\nworkload = "resnet50"\n')
    assert scenario.load(path).name == "bom"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_results_table_files_get_the_mode_of_ordinary_files(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        results.append(tmp_path, [{"schema_version": 1, "sweep_id": "s", "run_id": "s/0000", "status": "ok"}])
    finally:
        os.umask(old)
    for name in (results.PARQUET, results.CSV):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


def test_a_timeout_reason_counts_warm_up_and_measured_steps_right(tmp_path):
    from harness.experiment.matrix import expand

    (spec,) = expand(_parse(settings={"warmup_steps": 1, "measured_steps": 500, "repeats": 1}))
    in_warmup = RankRecord(rank=0, hello={"rank": 0})
    assert "rank 0 still running after 0 of 1 warm-up steps" in collect._timeout_state(tmp_path, in_warmup, spec)
    measuring = RankRecord(rank=1, hello={"rank": 1}, warmup_steps=[0.1], step_seconds=[0.1] * 7)
    assert "rank 1 still running after measured step 7 of 500" in collect._timeout_state(tmp_path, measuring, spec)


def _row_dict(i: int, **kw) -> dict:
    return {"schema_version": 1, "sweep_id": "s1", "run_id": f"s1/{i:04d}", "config_id": "c", "repeat": i,
            "framework": "torch_ddp", "workload": "resnet50", "status": "ok", "timestamp": f"2026-01-01T00:00:0{i}",
            "throughput": 100.0 + i, **kw}


def test_an_unreadable_table_stops_a_sweep_before_its_first_run_and_rebuild_restores_it(tmp_path, capsys):
    from harness.running.runner import run_sweep

    out = tmp_path / "results"
    rows = [_row_dict(i) for i in range(3)]
    for i, row in enumerate(rows):
        (out / "runs" / "s1" / f"{i:04d}").mkdir(parents=True)
        results.write_row_json(out / "runs" / "s1" / f"{i:04d}" / "row.json", row)
    results.append(out, rows)
    data = (out / results.PARQUET).read_bytes()
    (out / results.PARQUET).write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="not a readable results table.*rosetta rebuild"):
        run_sweep(_parse(), out)
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["s1"]  # no run started
    assert cli.main(["rebuild", "--results", str(out)]) == 0
    assert "rebuilt" in capsys.readouterr().out
    table = results.load(out)
    assert table["run_id"].tolist() == ["s1/0000", "s1/0001", "s1/0002"]
    assert table["throughput"].tolist() == [100.0, 101.0, 102.0]
    assert (out / f"{results.PARQUET}.broken-0").read_bytes() == data[: len(data) // 2]  # kept, not lost


def test_rebuild_without_row_copies_is_a_one_line_error(tmp_path):
    from harness.results.rebuild import rebuild

    with pytest.raises(UserError, match="no runs/\\*/\\*/row.json to rebuild"):
        rebuild(tmp_path)


# ------------------------------------------------------------------ reports follow the rows


def _summary_rows(**kw) -> pd.DataFrame:
    base = {"schema_version": 1, "sweep_id": "s1", "config_id": "c", "scenario": "x", "framework": "torch_ddp",
            "workload": "digits", "size": "tiny", "nodes": 1, "procs_per_node": 1, "world_size": 1,
            "batch_per_worker": 8, "global_batch": 8, "strategy": "allreduce", "storage": "synthetic",
            "launcher": "torchrun", "device_requested": "cpu", "device": "cpu", "sample_unit": "images",
            "network": "unlimited", "precision": "fp32", "memory_format": "contiguous", "compile": "off"}
    return results.to_frame([{**base, "repeat": i, "run_id": f"s1/{i:04d}", "timestamp": f"t{i}", **kw}
                             for i in range(2)])


@pytest.fixture
def figures(monkeypatch):
    """The matplotlib figures the charts save, kept for inspection (the PNGs are still written)."""
    kept = []
    real = charts.save_figure

    def keep(fig, path):
        kept.append(fig)
        return real(fig, path)

    monkeypatch.setattr(charts, "save_figure", keep)
    return kept


def test_a_sweep_without_an_ok_run_is_reported_as_such_with_reasons(tmp_path, figures):
    table = _summary_rows(status="timeout", reason="no exit within 1 s (rank 0 never said hello)")
    results.append(tmp_path, table.to_dict("records"))
    built = notebook.build(tmp_path, "s1")
    md = built["markdown"].read_text()
    assert "No run of this sweep succeeded (statuses: timeout): nothing was measured." in md
    assert "no exit within 1 s (rank 0 never said hello)" in md and "| timeout |" in md
    assert md.index("## Notes") < md.index("![")  # the failures before the charts
    for fig in figures:  # no empty 0..1 axes: every chart says there is nothing
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert all(not ax.axison for ax in fig.axes) and any("nothing measured" in t for t in texts)


def test_the_notebook_draws_accuracy_curves_when_the_rows_hold_them(tmp_path):
    curve = json.dumps([[10, 0.5, 1.2], [20, 0.8, 0.6]])
    table = _summary_rows(status="ok", throughput=1000.0, step_times_s=json.dumps([0.01, 0.011]),
                          accuracy_curve=curve, target_accuracy=0.93, final_accuracy=0.8)
    results.append(tmp_path, table.to_dict("records"))
    built = notebook.build(tmp_path, "s1")
    assert any("accuracy" in title.lower() for title in built["charts"])
    md = built["markdown"].read_text()
    assert "no such chart" not in md and "first and last loss" not in md
    no_curve = _summary_rows(status="ok", throughput=1000.0, step_times_s=json.dumps([0.01, 0.011]))
    results.append(tmp_path / "b", no_curve.to_dict("records"))
    assert any("evaluated held-out accuracy" in n for n in notebook.build(tmp_path / "b", "s1")["notes"])


def test_time_to_target_axis_says_not_reached_instead_of_seconds_around_zero(tmp_path, figures):
    curve = json.dumps([[10, 0.5, 1.2], [20, 0.6, 1.0]])
    table = _summary_rows(status="ok", throughput=1000.0, step_times_s=json.dumps([0.01]), accuracy_curve=curve,
                          target_accuracy=0.93, final_accuracy=0.6)
    charts.plot_strategies(aggregate.summarize(table), tmp_path / "s.png")
    tta = next(ax for ax in figures[0].axes if ax.get_title().startswith("time to 93%"))
    assert list(tta.get_yticks()) == [] and "not reached by any run" in [t.get_text() for t in tta.texts]


def test_telemetry_ticks_name_their_axis_and_bar_labels_avoid_scientific_notation(tmp_path, figures):
    table = pd.concat([_summary_rows(status="ok", procs_per_node=p, world_size=p, config_id=f"c{p}",
                                     throughput=22_600.0 * p, telemetry_samples=5, cpu_util_pct=90.0,
                                     rss_max_mb=300.0, step_times_s=json.dumps([0.01]))
                       for p in (1, 2)], ignore_index=True)
    charts.plot_telemetry(table, tmp_path / "t.png")
    ticks = [t.get_text() for t in figures[0].axes[-1].get_xticklabels()]
    assert ticks == ["procs_per_node=1 world_size=1", "procs_per_node=2 world_size=2"]
    charts.plot_bars(aggregate.summarize(table), tmp_path / "b.png")
    labels = [t.get_text() for ax in figures[1].axes for t in ax.texts]
    assert "22,600" in labels and not any("e+" in t for t in labels)


# ------------------------------------------------------------------ CI: exit statuses and compare's files

# the conftest's tiny scenario, one process, with a timeout no launch can meet
TIMES_OUT = TINY.replace("timeout_s = 240", "timeout_s = 1").replace("procs_per_node = [1, 2]", "procs_per_node = 1")


@pytest.mark.runs
def test_run_exits_1_when_a_run_fails_unless_failures_are_allowed(write_scenario, tmp_path, capfd):
    pytest.importorskip("torch")
    path = write_scenario(TIMES_OUT)
    assert cli.main(["run", str(path), "--results", str(tmp_path / "a")]) == 1
    captured = capfd.readouterr()
    assert "1 of 1 runs did not succeed (1 timeout); exit 1 (--allow-failures to accept)" in captured.err
    (row,) = results.load(tmp_path / "a").to_dict("records")
    line = next(ln for ln in captured.out.splitlines() if "timeout" in ln and "run 1/1" in ln)
    assert row["reason"] in line  # the whole reason on one line, not cut mid-sentence
    after = captured.out.split(line, 1)[1]
    assert not re.search(r"1/1\s+\d+:\d\d:\d\d", after), after[:300]  # no stale progress bar (M/N elapsed)
    assert cli.main(["run", str(path), "--results", str(tmp_path / "b"), "--allow-failures"]) == 0


def _compare_rows(config_id, steps, **extra):
    base = {"schema_version": 1, "sweep_id": "s", "timestamp": "t", "config_id": config_id, "framework": "torch_ddp",
            "workload": "resnet50", "size": "tiny", "nodes": 1, "procs_per_node": 1, "batch_per_worker": 4,
            "global_batch": 4, "strategy": "allreduce", "storage": "synthetic", "sample_unit": "images",
            "status": "ok", "cpu_model": "cpu", "cpu_cores": 2}
    return [{**base, **extra, "repeat": i, "step_times_s": json.dumps(s), "throughput": 4 / min(s)}
            for i, s in enumerate(steps)]


def test_compare_writes_junit_markdown_and_json_for_ci(tmp_path, capsys):
    steady = [[0.080 + 0.0001 * (i % 3)] * 20 for i in range(3)]
    slowed = [[t * 1.25 for t in s] for s in steady]
    results.append(tmp_path / "base", _compare_rows("same", steady) + _compare_rows("slow", steady)
                   + _compare_rows("broke", steady) + _compare_rows("gone", steady))
    results.append(tmp_path / "cur", _compare_rows("same", steady) + _compare_rows("slow", slowed)
                   + [{**_compare_rows("broke", [[0.1]])[0], "status": "failed", "reason": "rank 1 died",
                       "step_times_s": None}])
    junit, md, js = tmp_path / "out/junit.xml", tmp_path / "out/summary.md", tmp_path / "out/verdicts.json"
    code = cli.main(["compare", str(tmp_path / "base"), str(tmp_path / "cur"), "--junit", str(junit),
                     "--markdown", str(md), "--json", str(js)])
    assert code == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = {c.get("name").rsplit(" (", 1)[1][:-1]: c for c in suite.findall("testcase")}
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "2", "1")
    assert len(cases) == 4 and cases["same"].find("failure") is None
    slow = cases["slow"].find("failure")
    assert slow.get("type") == "regression" and "-20.0%" in slow.get("message") and "95% CI" in slow.get("message")
    broke = cases["broke"].find("failure")
    assert broke.get("type") == "failed" and "rank 1 died" in broke.get("message")
    assert cases["gone"].find("skipped") is not None
    verdicts = json.loads(js.read_text())
    assert verdicts["gate_failed"] is True
    assert {c["config_id"]: c["verdict"] for c in verdicts["configurations"]} == {
        "same": "no change", "slow": "regression", "broke": "failed", "gone": "missing"}
    summary = md.read_text()
    assert "**gate failed**: 2 of 4" in summary and "| **regression** | -20.0% |" in summary


def test_list_shows_every_axis_a_scenario_takes_per_framework(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for col in ("precision", "memory format", "compile", "devices"):
        assert col in out
    for name in frameworks.names():
        info = frameworks.get(name)
        for value in (*[p.value for p in info.precisions], *[c.value for c in info.compiles]):
            assert value in out
    assert "channels_last" in out and "procs_per_node 1..256" in out


def test_list_shows_the_hybrid_for_torch_ddp_on_resnet50_only(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    names = frameworks.names()
    following = names[names.index("torch_ddp") + 1]
    torch_rows = out.split("│ torch_ddp", 1)[1].split(f"\n│ {following}", 1)[0]  # torch_ddp's row of the table
    assert "│ hybrid " in torch_rows or " hybrid," in torch_rows
    assert "hybrid (torch_ddp: resnet50 only)" in " ".join(out.split())  # the strategies line, however wrapped


def test_more_ranks_than_this_machine_can_hold_are_planned_as_skipped(capsys, write_scenario):
    path = write_scenario("""
        [settings]
        repeats = 1
        [matrix]
        framework = "torch_ddp"
        workload = "resnet50"
        procs_per_node = 256
        launcher = ["torchrun", "mpirun"]
        """)
    assert cli.main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "yes" not in out.split("will run", 1)[1] and out.count("skip: 256 ranks") == 2
