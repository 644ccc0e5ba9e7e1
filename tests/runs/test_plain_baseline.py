"""The single-device baseline: torch_ddp measures the plain loop (no DDP wrapper) beside DDP at world
size 1, and efficiency divides by it, saying so."""

from __future__ import annotations

import math

import pytest

from harness.experiment import scenario
from harness.reports import aggregate, terminal
from harness.results import table as results
from harness.running.runner import run_sweep

TINY = {"name": "plain", "settings": {"warmup_steps": 1, "measured_steps": 3, "repeats": 1, "device": "cpu",
                                      "timeout_s": 600},
        "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "procs_per_node": [1, 2],
                   "batch_per_worker": 2}}


def test_plain_loop_is_measured_at_world_size_one_and_is_the_efficiency_base(tmp_path):
    pytest.importorskip("torch")
    rows = run_sweep(scenario.parse(TINY, "test"), tmp_path)
    by_world = {r["world_size"]: r for r in rows}
    assert all(r["status"] == "ok" for r in rows), [r["reason"] for r in rows]
    assert by_world[1]["plain_throughput"] > 0
    assert "plain_throughput" not in by_world[2] or math.isnan(by_world[2].get("plain_throughput") or math.nan)
    summary = aggregate.summarize(results.load(tmp_path))
    one = summary[summary["world_size"] == 1].iloc[0]
    two = summary[summary["world_size"] == 2].iloc[0]
    assert set(summary["efficiency_baseline"]) == {aggregate.PLAIN_BASELINE}
    assert one["efficiency"] == pytest.approx(one["throughput_median"] / one["plain_throughput"])
    assert two["efficiency"] == pytest.approx(two["throughput_median"] / (2 * one["plain_throughput"]))
    assert one["wrapper_cost"] == pytest.approx(one["efficiency"])

    from rich.console import Console

    console = Console(record=True, width=250)
    terminal.print_table(summary, console)
    text = console.export_text()
    assert "efficiency vs the plain single-device loop (no DDP wrapper)" in text
    assert "wrapper's cost: torch_ddp resnet50/tiny b2 at world size 1 ran at" in text


def test_without_a_plain_figure_the_base_is_the_framework_itself():
    import pandas as pd

    base = pd.Series({"world_size": 1, "plain_throughput": math.nan, "throughput_median": 10.0,
                      "framework": "tf_mwms"})
    assert aggregate.baseline(base) == (10.0, "tf_mwms itself at world size 1")


def test_a_version_1_table_is_still_read_with_the_new_column_empty(tmp_path):
    import pandas as pd

    row = results.to_frame([{"schema_version": 1, "sweep_id": "s", "run_id": "s/0", "framework": "torch_ddp",
                             "status": "ok", "throughput": 5.0}])
    row.to_parquet(tmp_path / results.PARQUET, index=False)
    back = results.load(tmp_path)
    assert back["schema_version"].tolist() == [1] and pd.isna(back["plain_throughput"].iloc[0])
