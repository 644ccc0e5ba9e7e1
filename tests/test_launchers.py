"""Launchers are pure functions: check exactly what would run."""

from pathlib import Path

from harness.axes import Device, Size, Storage, Strategy, Workload
from harness.launchers import LaunchRequest, get, unsupported_reason
from harness.spec import RunSpec


def spec(**kw):
    base = dict(scenario="t", framework="torch_ddp", workload=Workload.RESNET50, size=Size.TINY,
                workload_options={"image_size": 32, "num_classes": 1000}, nodes=1, procs_per_node=2,
                batch_per_worker=4, strategy=Strategy.ALLREDUCE, storage=Storage.SYNTHETIC, repeat=0,
                warmup_steps=1, measured_steps=3, timeout_s=60.0, device=Device.CPU, seed=0)
    base.update(kw)
    return RunSpec(**base)


def test_torchrun_command():
    request = LaunchRequest(spec(), "frameworks.torch_ddp.worker", Path("/r/spec.json"), "/py/python", cpu_count=8)
    command = get("torchrun")(request)
    assert command.argv == ("/py/python", "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                            "--nproc-per-node", "2", "--no-python", "/py/python", "-m", "harness.worker",
                            "frameworks.torch_ddp.worker", "/r/spec.json")
    assert command.env["OMP_NUM_THREADS"] == "4"  # 8 cores shared by 2 ranks


def test_threads_never_below_one():
    request = LaunchRequest(spec(procs_per_node=4), "m", Path("s"), "py", cpu_count=2)
    assert get("torchrun")(request).env["OMP_NUM_THREADS"] == "1"


def test_multi_node_is_unsupported_by_local_torchrun():
    assert "2 nodes" in unsupported_reason("torchrun", spec(nodes=2))
    assert unsupported_reason("torchrun", spec()) is None


def test_spec_json_round_trip():
    s = spec()
    assert RunSpec.from_json(s.to_json()) == s
