"""A real 4-rank gloo run of torch_ddp: its row names a slowest rank and the run's folder keeps every rank's
breakdown, from the ranks' own records (DDP's timing, their steps), nothing mocked."""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from harness.experiment import scenario  # noqa: E402
from harness.reports import rank_charts  # noqa: E402
from harness.results import table as results  # noqa: E402
from harness.running.collect import ATTRIBUTION_FILE  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402

FOUR_RANKS = """
name = "attribution"
[settings]
warmup_steps = 3
measured_steps = 20
repeats = 1
timeout_s = 240
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "digits"
procs_per_node = 4
batch_per_worker = 16
"""


def test_a_four_rank_run_says_where_its_time_went(write_scenario, tmp_path):
    [row] = run_sweep(scenario.load(write_scenario(FOUR_RANKS)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["slowest_rank"] in range(4) and row["slowest_host"] and row["straggler_score"] >= 1.0
    assert row["attribution_phase"] in ("compute", "exchange", "data", "rest")
    ranks = json.loads((Path(row["run_dir"]) / ATTRIBUTION_FILE).read_text())["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    for r in ranks:  # DDP timed compute on every rank; the phases are the step, nothing counted twice
        assert r["compute_s"] > 0
        parts = r["compute_s"] + r["peer_wait_s"] + r["exchange_s"] + r["data_s"] + r["rest_s"]
        assert parts == pytest.approx(r["step_s"], rel=1e-6) or r["rest_s"] == 0
    chart = rank_charts.plot_ranks(results.to_frame([row]), tmp_path / "ranks.png")  # the report's per-rank chart
    assert chart is not None and chart.stat().st_size > 10_000
