"""A real sweep of TensorFlow's own parameter-server training (tf_mwms, strategy ps_async) on digits:
torchrun starts 4 processes, a coordinator, 1 parameter server and 2 workers, which form a
ParameterServerStrategy cluster over gRPC on loopback; nothing mocked."""

import json

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("sklearn")

from harness.experiment import scenario  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402

STEPS, WORKERS, BATCH = 150, 2, 16
DIGITS = f"""
name = "tf_ps"
[settings]
warmup_steps = 2
measured_steps = {STEPS}
repeats = 1
timeout_s = 150
device = "cpu"
[matrix]
framework = "tf_mwms"
workload = "digits"
size = "tiny"
procs_per_node = {WORKERS + 2}
batch_per_worker = {BATCH}
strategy = "ps_async"
[strategy_options.ps_async]
servers = 1
"""


def test_tensorflow_parameter_servers_train_digits_asynchronously(write_scenario, tmp_path):
    [row] = run_sweep(scenario.load(write_scenario(DIGITS, name="tf_ps.toml")), tmp_path / "sweep")
    assert row["status"] == "ok", row["reason"]
    assert row["weights_consistent"] is True  # every rank reports the servers' one final model
    # the time-to-accuracy verdict: the target and the held-out curve are there, reached or not
    assert row["target_accuracy"] == pytest.approx(0.93)
    curve = json.loads(row["accuracy_curve"])
    assert [step for step, _, _ in curve] == list(range(10, STEPS + 3, 10))
    assert curve[-1][1] > curve[0][1]  # it learns
    if row["steps_to_target"] is not None:
        assert row["time_to_target_s"] > 0
    # every update of the window has a staleness: the coordinator queued STEPS steps per worker
    updates = sum(json.loads(row["staleness_hist"]).values())
    assert updates == WORKERS * STEPS
    assert row["samples_measured"] == WORKERS * STEPS * BATCH
    assert row["staleness_max"] >= 1  # asynchronous: some updates land on a model another worker moved
    assert row["compression_ratio"] == pytest.approx(1.0)  # a worker sends its whole gradient every step
    # the one server takes in every update's gradient and sends the variables out: workers x model bytes
    assert row["server_bytes_in_per_step"] == pytest.approx(WORKERS * row["bytes_per_step"])
    assert row["server_bytes_out_per_step"] == pytest.approx(WORKERS * row["bytes_per_step"])
    assert row["throughput"] > 0 and row["world_size"] == WORKERS + 2
