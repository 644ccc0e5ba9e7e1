"""The emulated cluster made smaller ([emulation] gpus_per_rank, gradient_scale: docs/scaling.md): the options
resolve into every run's emulation, the links and the dilation follow them, a framework or strategy without
them is a one-line error of the scenario, and the pieces a worker uses keep the full size's shape."""

import math

import pytest

from frameworks.shared.emulated_clock import StepFactors
from harness.base.errors import UserError
from harness.experiment import matrix, scenario
from harness.launchers import hosts
from harness.machines import emulated_cluster
from tests.helpers.emulated_scenarios import scenario_text


def _spec(write_scenario, emulation="dilation = 8\ngpus_per_rank = 4\ngradient_scale = 8", **kw):
    [spec] = matrix.expand(scenario.load(write_scenario(scenario_text(emulation=emulation, **kw))))
    return spec


def test_the_reductions_resolve_into_the_run_and_its_row_counts_gpus(write_scenario):
    spec = _spec(write_scenario, nodes=2, procs=1)
    assert (spec.emulation["gpus_per_rank"], spec.emulation["gradient_scale"]) == (4, 8)
    assert spec.world_size == 2  # the processes the launcher starts
    assert (spec.gpus, spec.dimensions()["world_size"], spec.global_batch) == (8, 8, 8 * 64)
    full = _spec(write_scenario, emulation="dilation = 8", nodes=2, procs=4)
    assert (full.emulation["gpus_per_rank"], full.emulation["gradient_scale"], full.gpus) == (1, 1, 8)
    # the links' own exchange time is the emulated cluster's (8 GPUs on 2 hosts), whatever its processes
    assert spec.emulation["link_exchange_s"] == pytest.approx(full.emulation["link_exchange_s"])


def test_the_network_cards_carry_a_fraction_of_their_rate_at_the_same_latency(write_scenario):
    reduced = hosts.shaping(_spec(write_scenario, nodes=2, procs=1), ("h0", "h1"), hosts.RemoteShell.NETNS, "eth0")
    full = hosts.shaping(_spec(write_scenario, emulation="dilation = 8", nodes=2, procs=4), ("h0", "h1"),
                         hosts.RemoteShell.NETNS, "eth0")
    rate = lambda argv: int(argv[argv.index("rate") + 1].removesuffix("bit"))  # noqa: E731
    # 1/8 of the gradient, and a ring of 2 processes carries 1/2 of it a hop where one of 8 GPUs carries 7/8
    assert rate(reduced[0]) == int(1.1e9 * 8 / 8 / 8 * (1 / 2) / (7 / 8)) and rate(full[0]) == int(1.1e9 * 8 / 8)
    assert "tbf" not in reduced[1]  # one process a host: nothing between processes on loopback
    assert reduced[2][-1] == "eth0:0.000200000" == full[2][-2]  # 10GbE's 25 us x k, unchanged


def test_auto_dilation_counts_this_machines_processes_and_their_smaller_gradients(write_scenario):
    reduced = _spec(write_scenario, emulation="gpus_per_rank = 8\ngradient_scale = 32", nodes=8, procs=1)
    full = _spec(write_scenario, emulation="", nodes=8, procs=8)
    assert reduced.emulation["dilation"] < full.emulation["dilation"]


def test_a_framework_or_strategy_without_the_reduction_is_a_one_line_error(write_scenario):
    with pytest.raises(UserError, match=r"\[emulation\] gpus_per_rank: horovod_torch has no emulated cluster "
                                        r"with gpus_per_rank or gradient_scale"):
        _spec(write_scenario, framework="horovod_torch", launcher="horovodrun")
    with pytest.raises(UserError, match=r"gradient_scale run in torch_ddp with allreduce, fsdp only, not onebit"):
        _spec(write_scenario, emulation="gradient_scale = 4", extra='strategy = "onebit"')
    with pytest.raises(UserError, match=r"gpus_per_rank, gradient_scale, update_share and input_workers need exchange"):
        text = scenario_text(emulation="gpus_per_rank = 2").replace('exchange = "gradients"', "")
        scenario.load(write_scenario(text.replace('intra_link = "PCIe3"\ninter_link = "10GbE"', "")))
    with pytest.raises(UserError, match=r"gpus_per_rank: a \[faults\] table places its fault on one GPU"):
        _spec(write_scenario, faults={"kind": "slow_gpu"})
    with pytest.raises(UserError, match=r"gpus_per_rank.*>= 1"):
        _spec(write_scenario, emulation="gpus_per_rank = 0")


def test_a_process_for_g_gpus_draws_the_slowest_of_g_steps():
    factors = {"step_factors": [0.9, 1.0, 1.3]}
    one = StepFactors(factors, seed=0, rank=0)
    eight = StepFactors({**factors, "gpus_per_rank": 8}, seed=0, rank=0)
    singles = [one.draw() for _ in range(400)]
    hosts_ = [eight.draw() for _ in range(400)]
    assert set(singles) == {0.9, 1.0, 1.3}
    # the slowest of 8 draws is 1.3 unless all 8 missed it: (2/3)^8 = 3.9% of steps
    assert sum(f == 1.3 for f in hosts_) / 400 > 0.9 > sum(f == 1.3 for f in singles) / 400
    assert StepFactors({}, seed=0, rank=0).draw() == 1.0


def test_the_reduced_ring_keeps_the_whole_rings_bandwidth_and_latency_terms():
    """A ring among P processes standing for W GPUs: its hops carry (P-1)/P of the bytes where the ring through
    every GPU carries (W-1)/W (its links slowed by their ratio), it lacks 2(W-P) latency steps (timed), and it
    cannot beat the in-host hops (their ring through the W GPUs, timed)."""
    assert emulated_cluster.ring_share(2, 8) == pytest.approx((1 / 2) / (7 / 8))
    assert emulated_cluster.ring_share(64, 512) == pytest.approx((63 / 64) / (511 / 512))
    assert emulated_cluster.ring_share(8, 8) == emulated_cluster.ring_share(1, 8) == 1.0
    assert (emulated_cluster.missing_ring_steps(2, 8), emulated_cluster.missing_ring_steps(8, 8)) == (12, 0)
    pcie = emulated_cluster.link("PCIe3")
    nbytes = 4 * 25_557_032
    assert emulated_cluster.in_host_floor_s(pcie, 4, nbytes) == pytest.approx(2 * 3 * 5e-6 + 2 * 3 / 4 * nbytes / 10e9)
    assert emulated_cluster.in_host_floor_s(pcie, 1, nbytes) == 0.0
    assert emulated_cluster.in_host_floor_s(None, 8, nbytes) == 0.0


def test_scaled_gradients_keep_the_tensors_and_the_buckets():
    """1/s of each parameter (rounded up), the same tensors in the same order, DDP's bucket caps at 1/s."""
    pytest.importorskip("torch")
    from frameworks.shared.pytorch import emulated_gradients, emulated_host
    from harness.contract.axes import Size, Workload
    from harness.contract.workloads import WORKLOADS

    class Spec:
        workload, seed = Workload.RESNET50, 0
        workload_options = WORKLOADS[Workload.RESNET50].options(Size.TINY)

    real = emulated_gradients.build_model(Spec.workload, dict(Spec.workload_options))
    scaled = emulated_gradients.scaled_model(Spec, 16)
    sizes = [p.numel() for p in real.parameters()]
    assert [p.numel() for p in scaled.parameters()] == [math.ceil(n / 16) for n in sizes]
    assert [n for n, _ in scaled.named_parameters()] == [n for n, _ in real.named_parameters()]
    assert sum(p.numel() for p in scaled.parameters()) < sum(sizes) / 15
    assert [b.shape for b in scaled.buffers()] == [b.shape for b in real.buffers()]
    class Bert:
        workload, seed = Workload.BERT, 0
        workload_options = WORKLOADS[Workload.BERT].options(Size.TINY)

    tied = emulated_gradients.build_model(Bert.workload, dict(Bert.workload_options))
    assert [p.numel() for p in emulated_gradients.scaled_model(Bert, 4).parameters()] == [
        math.ceil(p.numel() / 4) for p in tied.parameters()]  # the MLM decoder's weight still the embeddings'
    assert emulated_host.ddp_options({"gradient_scale": 1}) == {}
    assert emulated_host.ddp_options({"gradient_scale": 25})["bucket_cap_mb_list"] == pytest.approx([1 / 25, 1.0])
