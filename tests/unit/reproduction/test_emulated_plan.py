"""A published point whose processes do not fit this machine's memory runs reduced on the emulated cluster
(one process a host standing for its GPUs, gradients at 1/32, hosts merged in pairs where even that does not
fit), where its framework has the reductions; else it stays at full size and is a skipped row. The memory is
injected: no process starts."""

from __future__ import annotations

from harness.experiment.matrix import expand
from harness.reproduction import emulated_plan as plan
from harness.reproduction import emulated_reproduction as emulated
from harness.reproduction import reference

DLPERF = reference.get("dlperf-rn50-4x8")  # 1 and 32 V100s, 8 a host: two torch_ddp series, one horovod_tf
HOSTS = {f"h{i}": f"10.0.0.{i + 1}" for i in range(8)}


def memory_for(ranks: float, scale: int = 1, framework: str = "torch_ddp") -> int:
    """Bytes available that hold ``ranks`` processes of ``framework`` at 1/``scale`` gradients."""
    return int(ranks * plan.rank_bytes(DLPERF, scale, framework) / plan.MEMORY_SHARE)


def test_a_point_that_fits_stays_full_size():
    assert plan.layout(DLPERF, "torch_ddp", "allreduce", 4, 8, memory_for(40)) == plan.Layout(4, 8)


def test_a_point_beyond_memory_is_a_process_a_host_at_a_32nd_of_the_gradients():
    lay = plan.layout(DLPERF, "torch_ddp", "allreduce", 4, 8, memory_for(10))
    assert lay == plan.Layout(4, 1, gpus_per_rank=8, gradient_scale=32) and lay.reduced
    assert plan.fits(DLPERF, "torch_ddp", lay, memory_for(10))


def test_hosts_merge_in_pairs_until_they_fit():
    few = memory_for(2.5, scale=32)  # two reduced processes, not four
    assert plan.layout(DLPERF, "torch_ddp", "allreduce", 4, 8, few) == plan.Layout(2, 1, 16, 32)
    assert plan.layout(DLPERF, "torch_ddp", "allreduce", 128, 8, memory_for(30, 32)) == plan.Layout(16, 1, 64, 32)


def test_a_framework_or_strategy_without_reductions_keeps_the_full_size_and_is_skipped():
    small = memory_for(10, framework="horovod_tf")
    for framework, strategy in (("horovod_tf", "allreduce"), ("torch_ddp", "onebit")):
        lay = plan.layout(DLPERF, framework, strategy, 4, 8, small)
        assert lay == plan.Layout(4, 8) and not plan.fits(DLPERF, framework, lay, small)


def test_the_scenarios_cut_where_the_layouts_differ():
    scenarios = emulated.emulated_scenarios(DLPERF, HOSTS, available=memory_for(10))
    laid = {s.name: (s.emulation.gpus_per_rank, s.emulation.gradient_scale,
                     [(r.framework, r.nodes, r.procs_per_node, r.launcher) for r in expand(s)]) for s in scenarios}
    assert laid["emulated-dlperf-rn50-4x8-series1"] == (1, 1, [("torch_ddp", 1, 1, "torchrun")])
    # the host processes through mpirun: its agent imports no torch
    assert laid["emulated-dlperf-rn50-4x8-series1-reduced-8-a-process"] == (8, 32, [("torch_ddp", 4, 1, "mpirun")])
    assert laid["emulated-dlperf-rn50-4x8-series3"][:2] == (1, 1)  # horovod_tf: full size, its 32 GPUs skipped
    reduced = next(s for s in scenarios if s.name.endswith("reduced-8-a-process"))
    assert emulated.reachable(DLPERF, reduced) >= 4
    assert emulated.hosts_needed(DLPERF, available=memory_for(10)) == 4  # horovod_tf's full-size point too
    assert emulated.hosts_needed(DLPERF, "torch_ddp", available=memory_for(2.5, scale=32)) == 2  # merged in pairs


def test_the_list_says_which_points_run_reduced_and_which_are_skipped(monkeypatch):
    monkeypatch.setattr(plan, "usable_bytes", lambda available=None: 10 * plan.rank_bytes(DLPERF, 1, "torch_ddp"))
    said = emulated.emulated_here(DLPERF)
    assert "32 GPUs and more reduced (a process a host, gradients at 1/32)" in said
    assert "horovod_tf's points of 32 GPUs and more skipped" in said and "no emulated cluster with" in said
