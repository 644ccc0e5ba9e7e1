"""Real runs: torchrun starts real gloo DDP processes; nothing is mocked."""

import json
from pathlib import Path

import psutil
import pytest

pytest.importorskip("torch")

from harness.experiment import scenario
from harness.results import table as results  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402
from tests.conftest import TINY  # noqa: E402


def _children_alive(before):
    return [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE]


def test_one_and_two_process_ddp(write_scenario, tmp_path, monkeypatch):
    sc = scenario.load(write_scenario(TINY.replace('size = "tiny"', 'size = "small"')))  # ResNet-50 at 64x64
    monkeypatch.chdir(tmp_path)  # a results folder named relative to here, while the ranks start in the repository
    rows = run_sweep(sc, Path("results"))
    assert [r["status"] for r in rows] == ["ok", "ok"], [r.get("reason") for r in rows]
    for row in rows:
        world = row["world_size"]
        assert row["samples_measured"] == world * 2 * 3  # counted on every rank
        ranks = [json.loads(line) for r in range(world)
                 for line in (tmp_path / "results" / "runs" / row["sweep_id"] / row["run_id"].split("/")[1]
                              / f"events-rank{r}.jsonl").read_text().splitlines()]
        windows = [e["seconds"] for e in ranks if e["event"] == "window"]
        assert len(windows) == world
        assert row["window_s"] == max(windows)
        assert row["throughput"] == pytest.approx(row["samples_measured"] / max(windows))
        assert len(json.loads(row["step_times_s"])) == 3
        assert row["weights_consistent"] is True
        assert row["parameters"] == 25_557_032
        assert row["device"] == "cpu" and row["framework_version"].startswith("2.")
        assert row["harness_version"] and row["cpu_cores"] and row["host"]
        assert json.loads(row["spec"])["workload"] == "resnet50"
        # MFU against this machine's measured CPU peak, and every rank's peak memory (docs/measurement.md)
        assert 0 < row["mfu"] and row["peak_source"].startswith("measured:") and row["peak_devices"] == 1
        assert row["achieved_tflops"] == pytest.approx(row["model_flops_per_sample"] * row["throughput"] / 1e12)
        assert len(json.loads(row["rank_peak_rss_mb"])) == world and row["peak_rss_mb"] > 100
    table = results.load(tmp_path / "results")
    assert len(table) == 2 and set(table["status"]) == {"ok"}


def test_worker_failure_becomes_a_row_and_the_sweep_goes_on(write_scenario, tmp_path):
    # asking for CUDA on a CPU-only machine makes every rank raise: a real worker failure
    text = TINY.replace('device = "cpu"', 'device = "cuda"').replace("procs_per_node = [1, 2]", "procs_per_node = 2")
    sc = scenario.load(write_scenario(text))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    rows = run_sweep(sc, tmp_path / "results")
    if rows[0]["status"] == "ok":
        pytest.skip("a GPU is present: this machine cannot provoke the failure")
    assert rows[0]["status"] == "failed"
    assert "launcher exit code" in rows[0]["reason"] and "cuda" in rows[0]["reason"]
    assert rows[0].get("throughput") is None  # never a silent zero
    assert results.load(tmp_path / "results")["throughput"].isna().all()
    assert not _children_alive(before)


def test_timeout_kills_every_process(write_scenario, tmp_path):
    text = TINY.replace("timeout_s = 240", "timeout_s = 3").replace("measured_steps = 3", "measured_steps = 100000")
    text = text.replace("procs_per_node = [1, 2]", "procs_per_node = 2")
    sc = scenario.load(write_scenario(text))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    rows = run_sweep(sc, tmp_path / "results")
    assert rows[0]["status"] == "timeout"
    assert "no exit within 3 s" in rows[0]["reason"]
    assert not _children_alive(before)


def test_telemetry_is_sampled_off_the_training_process(write_scenario, tmp_path):
    text = TINY.replace("procs_per_node = [1, 2]", "procs_per_node = 2").replace("measured_steps = 3",
                                                                                 "measured_steps = 10")
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["telemetry_samples"] >= 2  # a window of about 10 x 0.2 s, sampled every 0.5 s per rank
    assert 0 < row["cpu_util_pct"] <= 100 * psutil.cpu_count()
    assert row["rss_max_mb"] > 100  # torch and a ResNet-50 are resident
    if row["gpu_model"] is None:
        assert row["gpu_util_pct"] is None and row["gpu_power_w"] is None  # empty, never zero
    run_dir = tmp_path / "results" / "runs" / row["sweep_id"] / row["run_id"].split("/")[1]
    samples = [json.loads(line) for line in (run_dir / "telemetry-rank1.jsonl").read_text().splitlines()]
    assert samples and all("cpu_percent" in s for s in samples)
    # what else ran: both ranks on this machine, their trees the run's; busy or not as the machine was
    assert {s["boot_id"] for s in samples} == {open("/proc/sys/kernel/random/boot_id").read().strip()}
    assert 0 <= row["other_cpu_share"] <= 1 and 0 <= row["steal_share"] < 1 and row["load_avg"] >= 0
    assert row["machine_busy"] == (row["busy_note"] is not None)
    from harness.reports import charts

    table = results.load(tmp_path / "results")
    assert charts.plot_telemetry(table, tmp_path / "telemetry.png") == tmp_path / "telemetry.png"
    assert (tmp_path / "telemetry.png").stat().st_size > 10_000
    assert charts.plot_telemetry(table.assign(telemetry_samples=0), tmp_path / "none.png") is None
