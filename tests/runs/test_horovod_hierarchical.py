"""A run that asks Horovod for its hierarchical allreduce and does not get it says so in its row."""

import importlib.util

import pytest

from frameworks.shared.mpi_job import hierarchical_not_applied
from harness.experiment import scenario
from harness.running.runner import run_sweep


def test_the_reason_names_what_is_missing():
    asked = {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}
    assert hierarchical_not_applied({}, nccl_built=False, on_gpu=False, nodes=1) is None  # not asked
    assert hierarchical_not_applied({"HOROVOD_HIERARCHICAL_ALLREDUCE": "0"}, False, False, 1) is None
    assert hierarchical_not_applied(asked, nccl_built=True, on_gpu=True, nodes=2) is None  # applied
    cpu = hierarchical_not_applied(asked, nccl_built=False, on_gpu=False, nodes=2)
    assert cpu.startswith("HOROVOD_HIERARCHICAL_ALLREDUCE set but not applied") and "CPU tensors" in cpu
    assert "one node" not in cpu
    one_node = hierarchical_not_applied(asked, nccl_built=True, on_gpu=True, nodes=1)
    assert one_node.endswith("all ranks are on one node") and "CPU" not in one_node


@pytest.mark.skipif(importlib.util.find_spec("horovod") is None,
                    reason="horovod is not installed here (run tools/install_horovod.py in this environment)")
def test_a_horovod_run_that_asked_for_the_hierarchy_says_it_did_not_get_it(write_scenario, tmp_path, monkeypatch):
    text = """
    name = "horovod_hierarchical"
    [settings]
    warmup_steps = 1
    measured_steps = 2
    repeats = 1
    timeout_s = 300
    device = "cpu"
    [matrix]
    framework = "horovod_torch"
    workload = "digits"
    procs_per_node = 2
    batch_per_worker = 8
    launcher = "horovodrun"
    """
    monkeypatch.setenv("HOROVOD_HIERARCHICAL_ALLREDUCE", "1")  # the workers inherit the harness's environment
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["strategy_note"] == ("HOROVOD_HIERARCHICAL_ALLREDUCE set but not applied: Horovod's hierarchical "
                                    "allreduce runs on NCCL with GPU tensors; these are CPU tensors (a flat "
                                    "allreduce ran); all ranks are on one node")
