"""The report's summary and charts from hand-made rows (no runs)."""

import json
import math

import pytest

from harness.reports import aggregate, charts, terminal
from harness.results import table as results
from tests.helpers.rows import result_row


def _row(strategy, repeat, **kw):
    return result_row(**{"sweep_id": "s", "run_id": f"s/{strategy}{repeat}", "config_id": None, "scenario": "x",
                         "workload": "digits",
                         "size": "small", "procs_per_node": 2, "world_size": 2, "batch_per_worker": 16,
                         "strategy": strategy, "repeat": repeat, "throughput": 100.0 + repeat,
                         "step_times_s": json.dumps([0.01, 0.02]), "weights_consistent": True,
                         "timestamp": "2026-01-01T00:00:00+00:00", **kw})


def test_plain_sweep_is_reported_as_before():
    summary = aggregate.summarize(results.to_frame([_row("allreduce", 0, bytes_per_step=400.0,
                                                      compression_ratio=1.0)]))
    assert not aggregate.compares_strategies(summary)


def test_strategy_summary_and_chart(tmp_path):
    curve = json.dumps([[10, 0.5, 1.0], [20, 0.95, 0.2]])
    rows = [
        _row("allreduce", 0, bytes_per_step=400.0, compression_ratio=1.0, target_accuracy=0.93, steps_to_target=20,
             time_to_target_s=0.4, final_accuracy=0.95, accuracy_curve=curve),
        _row("allreduce", 1, bytes_per_step=400.0, compression_ratio=1.0, target_accuracy=0.93, steps_to_target=40,
             time_to_target_s=0.8, final_accuracy=0.97, accuracy_curve=curve),
        _row("onebit", 0, bytes_per_step=30.0, compression_ratio=13.3, target_accuracy=0.93, final_accuracy=0.88,
             accuracy_curve=json.dumps([[10, 0.5, 1.0], [20, 0.88, 0.4]])),  # never reached the target
        _row("onebit", 1, status="diverged", reason="loss is nan at measured step 3", throughput=None),
        _row("bf16", 0, status="skipped", reason="needs CUDA", throughput=None, device=None),
    ]
    summary = aggregate.summarize(results.to_frame(rows)).set_index("strategy")
    assert aggregate.compares_strategies(summary.reset_index())
    assert summary.loc["allreduce", "time_to_target_s"] == pytest.approx(0.6) and summary.loc["allreduce", "steps_to_target"] == 30
    assert summary.loc["allreduce", "final_accuracy"] == 0.96 and summary.loc["allreduce", "reached"] == 2
    assert summary.loc["onebit", "reached"] == 0 and summary.loc["onebit", "evaluated"] == 1
    assert math.isnan(summary.loc["onebit", "time_to_target_s"])
    assert summary.loc["onebit", "ok"] == 1 and "diverged" in summary.loc["onebit", "status"]
    assert terminal._to_target(summary.loc["onebit"]).startswith("[red]not reached")
    assert summary.loc["onebit", "compression_ratio"] == 13.3
    path = charts.plot_strategies(summary.reset_index(), tmp_path / "s.png")
    assert path.stat().st_size > 10_000
    assert charts.plot(summary.reset_index(), tmp_path / "t.png").exists()  # the throughput chart still works


def test_a_resumed_repeat_counts_once_its_last_attempt():
    from harness.reports.aggregate import summarize
    from harness.results import table as results

    base = {"schema_version": results.SCHEMA_VERSION, "sweep_id": "s", "config_id": "c", "scenario": "x",
            "framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "nodes": 1, "procs_per_node": 1,
            "world_size": 1, "batch_per_worker": 2, "strategy": "allreduce", "storage": "synthetic",
            "device": "cpu", "sample_unit": "images", "repeat": 0}
    table = results.to_frame([
        {**base, "run_id": "s/0000", "status": "failed", "reason": "boom", "timestamp": "2026-01-01T00:00:00"},
        {**base, "run_id": "s/0001", "status": "ok", "throughput": 5.0, "timestamp": "2026-01-01T00:01:00"},
    ])
    (row,) = summarize(table).to_dict("records")
    assert (row["runs"], row["ok"], row["reason"]) == (1, 1, None)


def test_superlinear_efficiency_is_flagged_not_shown_as_a_result():
    from rich.console import Console

    from harness.reports.aggregate import summarize
    from harness.reports.terminal import print_table
    from harness.results import table as results

    base = {"schema_version": results.SCHEMA_VERSION, "sweep_id": "s", "scenario": "x", "framework": "torch_ddp",
            "workload": "resnet50", "size": "tiny", "nodes": 1, "batch_per_worker": 2, "strategy": "allreduce",
            "storage": "synthetic", "device": "cpu", "sample_unit": "images", "status": "ok", "repeat": 0}
    table = results.to_frame([
        {**base, "config_id": "a", "procs_per_node": 1, "world_size": 1, "throughput": 3.0, "run_id": "s/0"},
        {**base, "config_id": "b", "procs_per_node": 2, "world_size": 2, "throughput": 20.0, "run_id": "s/1"},
    ])
    console = Console(record=True, width=200)
    print_table(summarize(table), console)
    text = console.export_text()
    assert "333%!" in text and "do not trust these figures" in text


def test_frameworks_side_by_side_table_and_chart(tmp_path):
    rows = [_row("allreduce", r, framework=fw, launcher=launcher, workload="resnet50", throughput=tp + r,
                 config_id=f"{fw}-{world}", procs_per_node=world, world_size=world)
            for fw, launcher, tp in [("torch_ddp", "torchrun", 100.0), ("chainer", "mpirun", 50.0)]
            for world in (1, 2) for r in range(2)]
    rows.append(_row("allreduce", 0, framework="chainer", launcher="mpirun", workload="bert", status="skipped",
                     reason="chainer has no bert model", throughput=None, config_id="chainer-bert"))
    rows.append(_row("allreduce", 0, framework="torch_ddp", launcher="torchrun", workload="bert", throughput=20.0,
                     config_id="torch-bert"))
    summary = aggregate.summarize(results.to_frame(rows))
    assert terminal.compares_frameworks(summary)
    side = terminal.frameworks_side_by_side(summary).set_index(["workload", "world_size"])
    assert list(side.columns[-3:]) == ["chainer", "torch_ddp", "best/worst"]  # launcher folded into the framework
    assert side.loc[("resnet50", 2), "torch_ddp"] == "100.5" and side.loc[("resnet50", 2), "chainer"] == "50.5"
    assert side.loc[("resnet50", 2), "best/worst"] == "1.99x"
    assert side.loc[("bert", 2), "chainer"] == "skipped" and side.loc[("bert", 2), "best/worst"] == "-"
    assert charts.plot_bars(summary, tmp_path / "f.png").stat().st_size > 10_000
    assert not terminal.compares_frameworks(summary[summary["framework"] == "chainer"])


def test_an_mfu_above_100_percent_is_never_shown_without_its_flag(tmp_path):
    """MFU in the table and the chart; one above 100% (a sparse peak in the table, a wrong FLOP count)
    carries the flag in its cell, a line naming the flag and the peak, and the chart's panel says it too."""
    from rich.console import Console

    rows = [_row("allreduce", 0, config_id="a", world_size=1, procs_per_node=1, mfu=0.42, achieved_tflops=0.42,
                 peak_source="measured: numpy float32 GEMM", peak_rss_mb=300.0),
            _row("allreduce", 0, config_id="b", world_size=2, mfu=1.04, achieved_tflops=1.04,
                 peak_source="measured: numpy float32 GEMM", peak_rss_mb=310.0, peak_gpu_reserved_mb=900.0)]
    summary = aggregate.summarize(results.to_frame(rows))
    console = Console(record=True, width=250)
    terminal.print_table(summary, console)
    text = console.export_text()
    assert "42%" in text and "300" in text and "310 (GPU 900)" in text
    assert "MFU: model FLOPs" in text and "measured: numpy float32 GEMM" in text
    shown = [line for line in text.splitlines() if "104%" in line]
    assert shown and all("104%!" in line or terminal.MFU_FLAG in line for line in shown)
    assert any(terminal.MFU_FLAG in line for line in shown)
    for mfu in (1.0001, 1.5, 5.63):  # every MFU above 100% the cell would show carries the "!"
        assert terminal.mfu_text(mfu).endswith("![/red]")
    assert terminal.mfu_text(0.999) == "100%" and terminal.mfu_text(math.nan) == "-"
    assert charts.plot(summary, tmp_path / "t.png").stat().st_size > 10_000
