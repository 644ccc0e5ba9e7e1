"""Real sweeps of the strategies on the digits workload: torchrun, 2 gloo processes, nothing mocked."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from harness.experiment import scenario  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402

DIGITS = """
name = "onebit"
[settings]
warmup_steps = 0
measured_steps = 300
repeats = 1
timeout_s = 240
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "digits"
procs_per_node = 2
batch_per_worker = 16
strategy = {strategies}
[strategy_options.onebit]
error_feedback = {error_feedback}
"""

# The claim, stated: 1-bit SGD with error feedback reaches the held-out target (93%) within 1.5x
# the steps plain allreduce needs and ends within 3 accuracy points of it; the same code with
# error feedback off ends at least 3 points below it with error feedback on and reaches the target,
# if at all, later. (Measured here on 2 CPU processes: allreduce and 1-bit with error feedback both
# reach 93% at step 170 and end at 0.95; without error feedback 1-bit never reaches it: 0.87.)
STEPS_TOLERANCE = 1.5
ACCURACY_TOLERANCE = 0.03


def _sweep(write_scenario, tmp_path, name, **fields):
    path = write_scenario(DIGITS.format(**fields), name=f"{name}.toml")
    return {r["strategy"]: r for r in run_sweep(scenario.load(path), tmp_path / "results")}


def test_onebit_needs_error_feedback_to_match_allreduce(write_scenario, tmp_path):
    with_ef = _sweep(write_scenario, tmp_path, "ef", strategies='["allreduce", "onebit"]', error_feedback="true")
    without = _sweep(write_scenario, tmp_path, "no_ef", strategies='"onebit"', error_feedback="false")["onebit"]
    allreduce, onebit = with_ef["allreduce"], with_ef["onebit"]
    for row in (allreduce, onebit, without):
        assert row["status"] == "ok", row["reason"]
        assert len(json.loads(row["accuracy_curve"])) == 300 // 10  # evaluated every 10 steps
    assert allreduce["steps_to_target"] is not None, allreduce["accuracy_curve"]
    assert onebit["steps_to_target"] is not None, onebit["accuracy_curve"]
    assert onebit["steps_to_target"] <= STEPS_TOLERANCE * allreduce["steps_to_target"]
    assert onebit["final_accuracy"] >= allreduce["final_accuracy"] - ACCURACY_TOLERANCE
    assert without["final_accuracy"] <= onebit["final_accuracy"] - ACCURACY_TOLERANCE, \
        (without["final_accuracy"], onebit["final_accuracy"])
    assert without["steps_to_target"] is None or without["steps_to_target"] > onebit["steps_to_target"]
    # on the wire: 1 bit per value plus two float32 means per column, against 32 bits per value
    assert allreduce["compression_ratio"] == pytest.approx(1.0)
    assert onebit["compression_ratio"] > 10
    assert onebit["bytes_per_step"] == without["bytes_per_step"]
    assert json.loads(without["strategy_options"]) == {"error_feedback": False}
    assert onebit["time_to_target_s"] > 0 and onebit["weights_consistent"] is True
    # DDP's own timing of every measured step but the last (logged at the next forward), on every rank
    from pathlib import Path

    from harness.contract.events import read_rank

    for rank in (0, 1):
        steps = read_rank(Path(allreduce["run_dir"]), rank).ddp_timing["steps"]
        assert len(steps) == 300 - 1
        assert all(s["forward_compute_s"] > 0 and s["backward_compute_s"] > 0 and s["backward_comm_s"] > 0
                   and 0 <= s["overlap_s"] <= s["backward_comm_s"] for s in steps)


def test_a_run_that_does_not_learn_is_diverged_not_a_throughput(write_scenario, tmp_path):
    text = DIGITS.format(strategies='"allreduce"', error_feedback="true")
    text = text.replace("measured_steps = 300", "measured_steps = 30").replace("procs_per_node = 2",
                                                                               "procs_per_node = 1")
    text += "[workload_options.digits]\nlr = 1000.0\n"
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert rows[0]["status"] == "diverged", rows[0]
    assert "loss" in rows[0]["reason"]
    assert rows[0].get("throughput") is None
    assert rows[0]["accuracy_curve"]  # how far it got is still recorded


def test_bf16_is_skipped_on_cpu_with_a_reason(write_scenario, tmp_path):
    text = DIGITS.format(strategies='"bf16"', error_feedback="true")
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")  # device cpu: never launched
    assert rows[0]["status"] == "skipped"
    assert "bf16 runs on cuda only" in rows[0]["reason"]
    if not torch.cuda.is_available():  # device auto: the worker finds no GPU and says so
        rows = run_sweep(scenario.load(write_scenario(text.replace('device = "cpu"', 'device = "auto"'),
                                                      name="auto.toml")), tmp_path / "results")
        assert rows[0]["status"] == "skipped" and "needs CUDA and NCCL" in rows[0]["reason"]


def test_onebit_runs_a_many_bucket_model(write_scenario, tmp_path):
    # ResNet-50 spans several DDP buckets, which DDP rebuilds after the first step
    from tests.conftest import TINY

    text = TINY.replace("procs_per_node = [1, 2]", "procs_per_node = 2\nstrategy = \"onebit\"").replace(
        "warmup_steps = 1", "warmup_steps = 2")
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["compression_ratio"] > 10  # about 32x less than fp32, less the per-column means
