"""Real sweeps of the asynchronous strategies on digits: torchrun, 2 gloo processes, parameter servers
over torch.distributed.rpc, Hogwild over one shared-memory model; nothing mocked."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from harness.experiment import scenario  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402

STEPS, WORKERS = 200, 2
DIGITS = f"""
name = "async"
[settings]
warmup_steps = 0
measured_steps = {STEPS}
repeats = 1
timeout_s = 240
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "digits"
procs_per_node = {WORKERS}
batch_per_worker = 16
strategy = {{strategies}}
[strategy_options.ps_async]
servers = {{servers}}
max_staleness = {{max_staleness}}
"""


def _sweep(write_scenario, tmp_path, name, strategies, servers=2, max_staleness=-1):
    text = DIGITS.format(strategies=json.dumps(strategies), servers=servers, max_staleness=max_staleness)
    path = write_scenario(text, name=f"{name}.toml")
    return {r["strategy"]: r for r in run_sweep(scenario.load(path), tmp_path / name)}


def _reached_target(row):
    assert row["status"] == "ok", row["reason"]
    assert row["weights_consistent"] is True
    assert row["steps_to_target"] is not None, row["accuracy_curve"]  # 93% held-out accuracy
    assert row["final_accuracy"] >= 0.9


def _updates(row) -> int:
    return sum(json.loads(row["staleness_hist"]).values())


def test_parameter_servers_converge_and_record_staleness_and_server_bytes(write_scenario, tmp_path):
    rows = _sweep(write_scenario, tmp_path, "ps", ["ps_sync", "ps_async", "allreduce"])
    sync, downpour = rows["ps_sync"], rows["ps_async"]
    # the synchronous server applies the mean of the two workers' gradients once a step, as DDP's
    # allreduce does, to the same data in the same order: the very same weights, bit for bit
    assert sync["weights_checksum"] == rows["allreduce"]["weights_checksum"]
    for row in (sync, downpour):
        _reached_target(row)
        assert _updates(row) == WORKERS * STEPS  # every push of every worker in the window
        assert row["compression_ratio"] == pytest.approx(1.0)  # a worker pushes its whole gradient
    assert sync["staleness_max"] == 0 and sync["staleness_mean"] == 0  # every push waits for the step's others
    assert downpour["staleness_max"] >= 1  # pushes are applied as they come: some land on a moved model
    assert json.loads(downpour["strategy_options"]) == {"servers": 2, "max_staleness": -1}
    # one server takes in every worker's gradient and sends each the model back: N x model bytes
    assert sync["server_bytes_in_per_step"] == WORKERS * sync["bytes_per_step"]
    assert sync["server_bytes_out_per_step"] == WORKERS * sync["bytes_per_step"]
    # two servers share it (whole tensors per server: the busiest holds a little over half)
    share = downpour["server_bytes_in_per_step"] / (WORKERS * downpour["bytes_per_step"])
    assert 0.5 <= share < 0.75, share


def test_a_staleness_bound_keeps_workers_within_it(write_scenario, tmp_path):
    row = _sweep(write_scenario, tmp_path, "ssp", ["ps_async"], servers=1, max_staleness=0)["ps_async"]
    _reached_target(row)
    assert _updates(row) == WORKERS * STEPS
    # no worker is ever a push ahead of the other: at most the other's one update lands in between
    assert row["staleness_max"] <= WORKERS - 1, row["staleness_hist"]


def test_hogwild_and_its_locking_variant_converge_on_one_shared_model(write_scenario, tmp_path):
    rows = _sweep(write_scenario, tmp_path, "hogwild", ["hogwild", "hogwild_locked"])
    for row in rows.values():
        _reached_target(row)  # the same weights on both ranks: they are one model in shared memory
        assert _updates(row) == WORKERS * STEPS
        assert row["bytes_per_step"] == 0  # nothing on a wire
        assert row["compression_ratio"] is None or row["compression_ratio"] != row["compression_ratio"]
        versions = json.loads(row["versions"])
        assert "torch" in versions
