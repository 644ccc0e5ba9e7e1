"""FSDP on the emulated cluster (frameworks/shared/pytorch/emulated_fsdp.py, docs/scaling.md): a sharded unit's
layers wait for their gathered parameters, the in-host part of a reduced cluster's collectives is timed, the
bytes count the gathers in the run's half precision, and the declaration and torchtitan's reference say so."""

import pytest

from frameworks.shared.emulated_clock import Schedule
from harness.machines import emulated_cluster


def test_a_held_layer_moves_the_later_deadlines_by_its_wait_only():
    schedule = Schedule([1.0, 2.0, 3.0])
    schedule.start = 100.0
    schedule.hold(1, ready_at=100.5)  # layer 1 may begin at 101.0: its parameters came sooner, nothing moves
    assert (schedule.start, schedule.held_s) == (100.0, 0.0)
    schedule.hold(1, ready_at=101.25)  # they came 0.25 s after layer 0 ended: layers 1 and 2 end 0.25 s later
    assert schedule.start == pytest.approx(100.25) and schedule.held_s == pytest.approx(0.25)
    schedule.hold(0, ready_at=101.0)  # the first layer's start is the pass's
    assert schedule.start == pytest.approx(101.0) and schedule.late_s == 0.0


def test_a_ring_gather_is_half_a_ring_allreduce():
    link = emulated_cluster.link("RoCE-400G-per-GPU")
    for ranks, nbytes in ((2, 1e6), (128, 436e6)):
        assert 2 * emulated_cluster.ring_gather_s(link, ranks, nbytes) == pytest.approx(
            emulated_cluster.ring_allreduce_s(link, ranks, nbytes))
    assert emulated_cluster.ring_gather_s(link, 1, 1e9) == 0.0


def test_a_process_for_g_gpus_adds_the_missing_ring_steps_and_the_in_host_floor():
    pytest.importorskip("torch")
    from frameworks.shared.pytorch.emulated_fsdp import InHostTiming

    full = InHostTiming({"dilation": 16.0, "intra_link": "NVLink4", "inter_link": "RoCE-400G-per-GPU"}, 128, 16)
    assert full.done_at(0.0, 1.0, 10**6) == 1.0  # one process a GPU: the real ring is the whole ring
    emulation = {"dilation": 16.0, "intra_link": "NVLink4", "inter_link": "RoCE-400G-per-GPU", "gpus_per_rank": 4,
                 "gradient_scale": 1024}
    reduced = InHostTiming(emulation, 32, 16)  # 32 processes standing for 128 GPUs on 16 hosts
    assert reduced.extra_s == pytest.approx((128 - 32) * 5e-6 * 16)  # W - P steps at the network card's latency
    nvlink = emulated_cluster.link("NVLink4")
    floor = emulated_cluster.ring_gather_s(nvlink, 128, 1024 * 4096) * 16
    assert reduced.done_at(10.0, 10.0, 4096) == pytest.approx(10.0 + max(reduced.extra_s, floor))
    # the in-host link carries one collective at a time: a second one started at once ends a floor later
    assert reduced.done_at(10.0, 10.0, 4096) == pytest.approx(10.0 + 2 * floor)


def test_the_bytes_count_the_gathers_in_half_precision_and_the_reduce_scatter_in_float32():
    torch = pytest.importorskip("torch")
    from frameworks.torch_ddp.strategies import fsdp

    params = [torch.nn.Parameter(torch.zeros(10, 4)), torch.nn.Parameter(torch.zeros(3))]
    # world 4: 10 rows padded to 12, 3 to 4; two gathers of a quarter each, one reduce-scatter of the whole
    assert fsdp.unit_bytes(params, 4, 2) == 2 * (48 + 4) * 4 // 4 + (48 + 4) * 4
    assert fsdp.unit_bytes(params, 4, 2, gathered_size=2) == 2 * (48 + 4) * 2 // 4 + (48 + 4) * 4


def test_torch_ddp_declares_fsdp_on_the_emulated_cluster_and_its_reductions():
    import frameworks
    from harness.contract.axes import Strategy

    info = frameworks.get("torch_ddp")
    assert Strategy.FSDP in info.emulated_exchanges and Strategy.FSDP in info.emulated_reduction_strategies
    assert info.unsupported_reduction(Strategy.FSDP, {"gpus_per_rank": 4, "gradient_scale": 1024}) is None
    assert "not onebit" in info.unsupported_reduction(Strategy.ONEBIT, {"gradient_scale": 2})


def test_torchtitans_fsdp_table_runs_reduced_on_the_emulated_cluster():
    """Its 8B model's fp32 parameters (32 GB) 1/1024 of their size (under 32 MB), a process for a host's 8 GPUs:
    one for 8 GPUs, 16 for 128."""
    from harness.reproduction import emulated_plan
    from harness.reproduction import emulated_reproduction as emulated
    from harness.reproduction.reference import all_references

    refs = all_references()
    ref = refs["torchtitan-llama31-8b-h100"]
    assert emulated.coverage(ref) is None
    assert emulated_plan.sharded_reduction(ref) == {"gpus_per_rank": 8, "gradient_scale": 1024}
    assert emulated.emulated_here(ref).startswith("yes: 2 points, up to 128 emulated h100-grand-teton GPUs")
    assert emulated_plan.sharded_reduction(refs["batchai-torch-v100"]) == {}  # data parallel: the full size
