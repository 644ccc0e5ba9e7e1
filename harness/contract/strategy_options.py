"""Each training strategy's options, as frozen dataclasses (no framework imported here).

A scenario overrides them per strategy in ``[strategy_options.<name>]`` (harness.experiment.strategies
reads and checks them); the resolved options travel to the workers in the spec as a plain mapping, which
is why they are part of the contract. Each is named by its strategy's declaration in
:class:`harness.contract.axes.Strategy`. Imports nothing of the harness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True)
class NoOptions:
    """Strategies without options (allreduce, fp16, bf16)."""


@dataclass(frozen=True)
class OnebitOptions:
    """1-bit SGD (Seide et al. 2014): every gradient column is sent as one bit per value plus the
    column's mean of positives and mean of negatives."""

    error_feedback: bool = True  # keep each worker's quantization error and add it to the next gradient


@dataclass(frozen=True)
class BmufOptions:
    """Blockwise model-update filtering (Chen and Huo 2016).

    Every ``block_steps`` local steps the workers' models are averaged; the block's averaged
    update G is filtered: delta = block_momentum * delta + block_lr * G; global += delta.
    Chen and Huo recommend block_momentum = 1 - 1/workers and block_lr = 1.
    """

    block_steps: int = field(default=4, metadata={"min": 1, "max": 100_000})  # local steps per block (tau)
    block_momentum: float = field(default=0.5, metadata={"min": 0.0, "max": 0.999})
    block_lr: float = field(default=1.0, metadata={"min": 0.0, "max": 100.0})
    nesterov: bool = True  # start each block from global + block_momentum * delta (NBM)


@dataclass(frozen=True)
class LocalSgdOptions:
    """Parameter averaging every ``tau`` local steps (SparkNet, Moritz et al. 2016)."""

    tau: int = field(default=4, metadata={"min": 1, "max": 100_000})  # local SGD steps between averagings


@dataclass(frozen=True)
class PowerSgdOptions:
    """PyTorch's PowerSGD hook (Vogels et al. 2019)."""

    rank: int = field(default=2, metadata={"min": 1, "max": 1024})  # matrix approximation rank
    start_iter: int = field(default=2, metadata={"min": 2, "max": 1_000_000})  # plain allreduce before this step (>= 2)
    error_feedback: bool = True


@dataclass(frozen=True)
class PsSyncOptions:
    """Synchronous parameter servers: the model's tensors sharded over ``servers`` servers, each the
    RPC agent of ranks 0..servers-1 (servers beside the workers, as MXNet's dist kvstore places them)."""

    servers: int = field(default=1, metadata={"min": 1, "max": 1024})  # at most the world size


@dataclass(frozen=True)
class PsAsyncOptions:
    """Downpour SGD (Dean et al. 2012): each worker pushes its gradient and pulls the model back; a
    server applies every push as it comes. ``max_staleness`` >= 0 bounds how far a worker may run ahead
    of the slowest (stale synchronous parallel, Ho et al. 2013): a worker's reply waits until every worker
    has pushed at least (its pushes - max_staleness) times; -1: no bound."""

    servers: int = field(default=1, metadata={"min": 1, "max": 1024})
    max_staleness: int = field(default=-1, metadata={"min": -1, "max": 1_000_000})


@dataclass(frozen=True)
class HierarchicalOptions:
    """Allreduce in three steps over process subgroups (Horovod's hierarchical allreduce, explicit)."""

    local_size: int = field(default=0, metadata={"min": 0, "max": 1024})  # ranks per host; 0: as the launcher says


@dataclass(frozen=True)
class FsdpOptions:
    """FSDP2 (``fully_shard``): every rank holds 1/world of parameters, gradients and optimizer state."""

    reshard_after_forward: bool = True  # free gathered parameters after forward (gather again for backward)


class PipelineSchedule(str, Enum):
    GPIPE = "gpipe"  # all microbatches forward, then all backward (Huang et al. 2019)
    ONE_F_ONE_B = "1f1b"  # one forward, one backward in the steady state (PipeDream-flush)


class PipelineBalance(str, Enum):
    TIME = "time"  # the contiguous cut whose largest stage takes the least measured forward+backward time
    FLOPS = "flops"  # the contiguous cut whose largest stage has the fewest forward FLOPs
    LAYERS = "layers"  # stages of equal layer count (within one)


@dataclass(frozen=True)
class MeshOptions:
    """A 2-D device mesh (Mesh-TensorFlow's layouts, JAX's ``jax.sharding``): ``model`` ranks along the model axis,
    world / model along the data axis; parameters and optimizer state split along the model axis, each rank's
    batch its own (the batch split along both axes)."""

    model: int = field(default=2, metadata={"min": 1, "max": 4096})  # must divide the world size


@dataclass(frozen=True)
class PipelineOptions:
    """One stage per rank (torch.distributed.pipelining); each step's batch cut into microbatches."""

    microbatches: int = field(default=4, metadata={"min": 1, "max": 4096})  # must divide batch_per_worker
    schedule: PipelineSchedule = PipelineSchedule.GPIPE
    balance: PipelineBalance = PipelineBalance.TIME  # how the layers are cut into stages
