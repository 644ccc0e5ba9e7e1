"""How each point of a reference's published configuration is laid out on the emulated cluster (docs/scaling.md,
"Beyond one rank per GPU"), so that a chart is reproduced at its published scale, 512 or 1,024 GPUs, on a machine
that holds about 30 processes:

- **sharded references** (a series with FSDP, ``REDUCED_STRATEGIES``: an 8B model's rank would hold 32 GB of
  fp32 parameters before sharding) always run reduced, every point alike: the parameters 1/s of their size, s
  the least power of two that brings the fp32 model under SCALED_MODEL_BYTES, each process standing for the
  fewest GPUs G (a power of two, at most a host's) that keeps the largest point within MAX_PROCESSES processes
  and this machine's memory (:func:`sharded_reduction`);
- **data-parallel points** run at full size (a process per GPU) where their processes fit this machine's
  memory, else, where the framework has the reductions (``FrameworkInfo.emulated_reductions``: torch_ddp's
  allreduce), one process a host standing for the host's GPUs with every gradient at 1/32 of its size over
  links 32 times slower (the reduction benchmarks/emulated_scale.py checks against the full-size emulation:
  16 V100s on 2 hosts, 95.2% against 94.6%), and where even one process a host does not fit, hosts merged in
  pairs (a process standing for two published hosts' GPUs, their exchange then timed as in-host: the row's
  ``nodes`` and ``gpus_per_rank`` say so) until they fit or a process stands for 64 GPUs. A framework without
  the reductions keeps its points at full size, and those beyond memory are skipped rows saying why.

Memory is this machine's available memory when the plan is made (``available``: bytes, injected by tests);
each process's bytes are :func:`rank_bytes`' estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import psutil

import frameworks
from harness.contract.axes import Reduction, Size, Strategy, Workload
from harness.contract.workloads import WORKLOADS
from harness.machines import model_flops
from harness.reproduction.published import points
from harness.reproduction.reference import Reference

RANK_BYTES_PER_GRADIENT_BYTE = 3  # parameters, gradients, DDP's buckets or Horovod's fusion buffer
# of the memory available now that the emulated ranks may take together; the rest is the harness's, the
# kernel's socket buffers' and the page cache's
MEMORY_SHARE = 0.85
REDUCED_STRATEGIES = (Strategy.FSDP,)
SCALED_MODEL_BYTES = 32e6
# 2 cores, shared: a process imports torch and wakes for every collective; an emulated FSDP rank of Llama 3.1
# 8B at 1/1024 peaked at 491 MB (RSS), and 32 of them would have held 15.7 GB of this machine's 23
MAX_PROCESSES = 16
REDUCED_GRADIENT_SCALE = 32  # a data-parallel point's, the scale benchmarks/emulated_scale.py checked
MAX_GPUS_PER_RANK = 64  # [emulation] gpus_per_rank's bound (harness/machines/accelerators.py)


def _gradient_parameters(pub, run) -> int:
    """The parameters of ``run``'s model an emulated rank holds a gradient of (the published count, or the
    weights the harness counts from the options where those are more)."""
    workload = Workload(pub.workload_of(run))
    options = WORKLOADS[workload].options(Size(pub.size))
    return max(pub.parameters_of(run), model_flops.weight_parameters(workload, options))


def _gradient_bytes(ref: Reference) -> float:
    pub = ref.published
    return 4 * max(_gradient_parameters(pub, run) for run in pub.runs)


def rank_bytes(ref: Reference, scale: int = 1, framework: str | None = None) -> float:
    """Bytes one emulated process of the published model needs in ``framework`` (default: the hungriest of the
    reference's runs' frameworks; FrameworkInfo.emulated_rank_base_bytes, measured: 555 MB a DDP rank, 601 a
    Horovod one, for ResNet-50), its gradients 1/``scale`` of their size."""
    names = [framework] if framework else [run.framework for run in ref.published.runs]
    base = max(frameworks.get(name).emulated_rank_base_bytes for name in names)
    return base + RANK_BYTES_PER_GRADIENT_BYTE * _gradient_bytes(ref) / scale


def usable_bytes(available: int | None = None) -> float:
    """What the emulated processes may take together: MEMORY_SHARE of ``available`` (default: now's)."""
    return (psutil.virtual_memory().available if available is None else available) * MEMORY_SHARE


def max_ranks(ref: Reference, scale: int = 1, available: int | None = None, framework: str | None = None) -> int:
    """Emulated processes (of 1/``scale`` gradients; ``framework``'s, default: the hungriest of the reference's)
    this machine's available memory holds at once."""
    return max(1, int(usable_bytes(available) // rank_bytes(ref, scale, framework)))


def sharded_reduction(ref: Reference, available: int | None = None) -> dict[str, int]:
    """``[emulation]``'s gpus_per_rank and gradient_scale of a reference whose series shard the model (see the
    module); empty where none does."""
    pub = ref.published
    if not any(Strategy(run.strategy) in REDUCED_STRATEGIES for run in pub.runs):
        return {}
    scale = 2 ** max(0, math.ceil(math.log2(_gradient_bytes(ref) / SCALED_MODEL_BYTES)))
    fits = min(MAX_PROCESSES, max_ranks(ref, scale, available))
    most = max(p.gpus for p in points(ref))
    gpus = 1
    while gpus * 2 <= pub.gpus_per_node and most / gpus > fits:
        gpus *= 2
    return {"gpus_per_rank": gpus, "gradient_scale": scale}


@dataclass(frozen=True)
class Layout:
    """One point as it runs: ``nodes`` hosts x ``procs_per_node`` processes, each standing for ``gpus_per_rank``
    GPUs, gradients at 1/``gradient_scale``."""

    nodes: int
    procs_per_node: int
    gpus_per_rank: int = 1
    gradient_scale: int = 1

    @property
    def reduced(self) -> bool:
        return self.gpus_per_rank > 1 or self.gradient_scale > 1

    @property
    def key(self) -> tuple[int, int]:
        """What one scenario's ``[emulation]`` holds for all its points: (gpus_per_rank, gradient_scale)."""
        return self.gpus_per_rank, self.gradient_scale


def layout(ref: Reference, framework: str, strategy: str, nodes: int, procs_per_node: int,
           available: int | None = None) -> Layout:
    """The point of ``nodes`` x ``procs_per_node`` published GPUs of ``framework``/``strategy``, laid out to fit
    (see the module)."""
    sharded = sharded_reduction(ref, available)
    if sharded:  # every point of the reference alike
        gpus = sharded["gpus_per_rank"]
        return Layout(nodes, max(1, procs_per_node // gpus), gpus, sharded["gradient_scale"])
    full = Layout(nodes, procs_per_node)
    if nodes * procs_per_node <= max_ranks(ref, 1, available, framework):
        return full
    asked = {Reduction.GPUS_PER_RANK.value: 2, Reduction.GRADIENT_SCALE.value: 2}
    if frameworks.get(framework).unsupported_reduction(Strategy(strategy), asked):
        return full  # beyond memory: a skipped row
    hosts, gpus = nodes, procs_per_node
    fits = max_ranks(ref, REDUCED_GRADIENT_SCALE, available, framework)
    while hosts > fits and hosts % 2 == 0 and gpus * 2 <= MAX_GPUS_PER_RANK:
        hosts, gpus = hosts // 2, gpus * 2
    return Layout(hosts, 1, gpus, REDUCED_GRADIENT_SCALE)


def fits(ref: Reference, framework: str, lay: Layout, available: int | None = None) -> bool:
    """Whether the point laid out as ``lay`` fits this machine's memory (else it is a skipped row)."""
    return lay.nodes * lay.procs_per_node <= max_ranks(ref, lay.gradient_scale, available, framework)
