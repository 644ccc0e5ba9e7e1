"""Emulated accelerators (device emulated): the real DataLoader reads real JPEGs from real storage, each
step sleeps an accelerator's profiled compute time, then the ranks barrier; AU, its verdict and the
checkpoint phase land in the row."""

import json

import pytest

from harness.base.errors import UserError
from harness.contract.axes import Precision, Workload
from harness.experiment import matrix, scenario
from harness.machines import accelerators

pytest.importorskip("torch")

from harness.running.runner import run_sweep  # noqa: E402

BASE = """
name = "emulated"
[settings]
warmup_steps = 1
measured_steps = {steps}
repeats = 1
timeout_s = 240
device = "emulated"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
precision = "fp32"
procs_per_node = {procs}
batch_per_worker = 2
storage = "local"
[emulation]
{emulation}
[storage_options.local]
url = "{url}"
loader_workers = {workers}
{extra}
"""


def test_profiles_are_data_with_sources_and_resolve_per_batch():
    profiles, thresholds = accelerators.load_profiles()
    assert thresholds["resnet50"] == 0.9 and all(p.source for p in profiles)
    # our own H100 row, exact, and MLPerf Storage's figures at batch 400
    assert accelerators.lookup("h100", Workload.RESNET50, 256, Precision.AMP_FP16, profiles)[0] == 0.059
    assert accelerators.lookup("h100-mlperf", Workload.RESNET50, 400, Precision.AMP_FP16, profiles)[0] == 0.224
    assert accelerators.lookup("a100-mlperf", Workload.RESNET50, 400, Precision.AMP_FP16, profiles)[0] == 0.435
    scaled, source = accelerators.lookup("h100", Workload.RESNET50, 128, Precision.AMP_FP16, profiles)
    assert scaled == pytest.approx(0.0295) and "scaled linearly from batch 256" in source
    with pytest.raises(UserError, match="no profile for accelerator 'tpu'"):
        accelerators.lookup("tpu", Workload.RESNET50, 256, Precision.FP32, profiles)


def test_emulation_table_is_required_with_device_emulated_and_refused_without(write_scenario, image_files):
    text = BASE.format(steps=3, procs=1, emulation='accelerator = "h100"', url=image_files, workers=0, extra="")
    with pytest.raises(UserError, match="emulation"):
        scenario.load(write_scenario(text.replace("[emulation]\naccelerator = \"h100\"\n", "")))
    with pytest.raises(UserError, match="only with device"):
        scenario.load(write_scenario(text.replace('device = "emulated"', 'device = "cpu"')))
    with pytest.raises(UserError, match=r"emulation\].*step"):
        scenario.load(write_scenario(text.replace('accelerator = "h100"', 'accelerator = "h100"\nstep = "nap"')))
    with pytest.raises(UserError, match=r"scenario.toml: \[emulation\] accelerator: no profile for accelerator 'tpu'"):
        scenario.load(write_scenario(text.replace('"h100"', '"tpu"')))
    spec = matrix.expand(scenario.load(write_scenario(text.replace("fp32", "amp_fp16")
                                                      + '\n')))[0]
    assert spec.emulation["au_threshold"] == 0.9


def test_emulated_run_reads_real_data_and_reports_au(image_files, write_scenario, tmp_path):
    """Two emulated accelerators of 50 ms per step fed by one loader worker each from a local folder: the
    sleeps are calibrated, AU is the profiled compute over the window, checkpoints are saved and loaded."""
    text = BASE.format(steps=6, procs=2, emulation="compute_s = 0.05", url=image_files, workers=1,
                       extra=f'checkpoint = "sharded"\ncheckpoint_mb = 2\ncheckpoint_dir = "{tmp_path}/ckpt"')
    text = text.replace(f'url = "{image_files}"', f'url = "{image_files}"')
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok"], [r.get("reason") for r in rows]
    row = rows[0]
    assert row["device"] == "emulated" and row["accelerator"] == "custom" and row["compute_s"] == 0.05
    assert row["compute_error_frac"] < 0.2  # the sleeps average the asked time (loaded machine: generous)
    window_compute = 0.05 * 6
    assert row["au"] == pytest.approx(window_compute / row["window_s"], rel=0.05) and 0 < row["au"] <= 1.0
    assert row["au_ok"] == (row["au"] >= 0.9)
    assert row["throughput"] == pytest.approx(2 * 2 * 6 / row["window_s"], rel=0.01)
    assert row["read_mb_s"] > 0 and 0 <= row["data_stall_frac"] <= 1
    assert 0 <= row["host_cpu_busy"] <= 1 and row["loader_busy"] >= 0
    assert row["checkpoint_mode"] == "sharded" and row["checkpoint_bytes"] == 2_000_000
    assert row["checkpoint_save_gb_s"] > 0 and row["checkpoint_load_gb_s"] > 0
    assert "fsync" in row["checkpoint_cache_defeat"] and "rank_shift=1" in row["checkpoint_cache_defeat"]
    assert json.loads(row["spec"])["emulation"]["compute_s"] == 0.05


def test_emulated_step_matches_a_real_step_of_the_same_length(image_files, write_scenario, tmp_path):
    """Fidelity: the same loader and backend, the compute spent as a calibrated sleep or as a busy loop
    of the same length (a real CPU step): AU and throughput agree (generous bound: a shared 2-core
    machine; benchmarks/emulation_fidelity.py measures it over rounds)."""
    rows = {}
    for step in ("sleep", "spin"):
        text = BASE.format(steps=6, procs=1, emulation=f'compute_s = 0.08\nstep = "{step}"', url=image_files,
                           workers=0, extra="")
        rows[step], = run_sweep(scenario.load(write_scenario(text, f"{step}.toml")), tmp_path / step)
        assert rows[step]["status"] == "ok", rows[step]["reason"]
        assert rows[step]["emulated_step"] == step
    assert rows["sleep"]["au"] == pytest.approx(rows["spin"]["au"], rel=0.25)
    assert rows["sleep"]["throughput"] == pytest.approx(rows["spin"]["throughput"], rel=0.25)


def test_most_emulated_accelerators_per_backend_needs_every_repeat_at_the_threshold(tmp_path):
    from harness.reports import emulation
    from harness.results import table as results

    def row(storage, world, au, cpu_bound=False, status="ok"):
        return {"schema_version": results.SCHEMA_VERSION, "device": "emulated", "status": status, "storage": storage,
                "world_size": world, "accelerator": "h100", "au": au, "au_threshold": 0.9, "au_ok": au >= 0.9,
                "throughput": 30.0 * world * au, "loader_cpu_bound": cpu_bound}
    frame = results.to_frame([row("local", 1, 0.97), row("local", 2, 0.93), row("local", 2, 0.95),
                              row("local", 4, 0.95), row("local", 4, 0.6, cpu_bound=True),  # one repeat failed
                              row("s3", 1, 0.7), row("s3", 2, 0.4)])
    best = emulation.max_accelerators(frame).set_index("storage")
    assert best.loc["local", "max_accelerators"] == 2 and best.loc["local", "limit_cpu_bound"]
    assert best.loc["local", "throughput_at_max"] == pytest.approx(30 * 2 * 0.94)
    assert best.loc["s3", "max_accelerators"] == 0 and best.loc["s3", "sizes_tried"] == "1,2"
    assert emulation.plot(frame, tmp_path / "e.png").stat().st_size > 0
    cluster = results.to_frame([{**row("synthetic", 2, 0.5), "exchange": "gradients"}])  # AU spent in the exchange
    assert emulation.max_accelerators(cluster).empty
