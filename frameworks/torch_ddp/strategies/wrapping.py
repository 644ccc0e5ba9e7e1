"""The training strategies in PyTorch: DDP communication hooks and torch.distributed.algorithms.

Every strategy wraps the model in DDP (one initial broadcast makes all ranks start alike) and
counts the bytes it hands to collectives, so that a run can report bytes on the wire per step
next to what plain fp32 gradient allreduce would send. Bytes are the payload of this worker's
messages (what it passes to all_reduce / all_gather), not the backend's total traffic.
"""

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.distributed.algorithms.model_averaging.utils import average_parameters
from torch.nn.parallel import DistributedDataParallel as DDP

from frameworks.shared.pytorch import emulated_host
from frameworks.shared.pytorch.training import dense_bytes
from frameworks.torch_ddp.strategies import hierarchical
from frameworks.torch_ddp.strategies.bmuf import BlockMomentum
from frameworks.torch_ddp.strategies.onebit import OnebitState, onebit_hook
from harness.contract.axes import Strategy

# Strategies without DDP or gradient collectives, trained by their own loop (async_training.py):
# parameter servers over torch.distributed.rpc, and Hogwild's model in shared memory.
WITHOUT_DDP = (Strategy.PS_SYNC, Strategy.PS_ASYNC, Strategy.HOGWILD, Strategy.HOGWILD_LOCKED)


class ByteCount:
    """A DDP hook wrapped to add ``bytes_of(bucket)`` to a counter before it runs."""

    def __init__(self, hook: Callable, bytes_of: Callable[[Any, dist.GradBucket], int]):
        self.hook, self.bytes_of, self.bytes_sent = hook, bytes_of, 0
        self.__name__ = self.__qualname__ = f"counted_{hook.__name__}"  # DDP logs the hook by name

    def __call__(self, state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        self.bytes_sent += self.bytes_of(state, bucket)
        return self.hook(state, bucket)


class DenseEveryStep:
    """Bytes of DDP's built-in allreduce: every gradient, every step."""

    def __init__(self, dense: int):
        self.dense, self.bytes_sent = dense, 0

    def after_step(self) -> None:
        self.bytes_sent += self.dense


def powersgd_bytes(state: powerSGD_hook.PowerSGDState, bucket: dist.GradBucket) -> int:
    """What powerSGD_hook sends for a bucket: the whole bucket before ``start_powerSGD_iter``, then
    P and Q of the matrices worth compressing plus the other tensors uncompressed (its own rule)."""
    if state.iter < state.start_powerSGD_iter:
        return bucket.buffer().numel() * bucket.buffer().element_size()
    elements = 0
    for tensor in bucket.gradients():
        n, m = tensor.view(tensor.shape[0], -1).shape
        rank = min(n, m, state.matrix_approximation_rank)
        worth, dense, compressed = powerSGD_hook._should_compress(n, m, rank, state.min_compression_rate)
        elements += compressed if worth else dense
    return elements * bucket.buffer().element_size()


@dataclass
class TrainingStrategy:
    """The model as the optimizer should see it, plus what to do around optimizer steps."""

    module: nn.Module  # the DDP-wrapped model: forward and backward go through it
    dense_bytes_per_step: int
    counter: Any  # has .bytes_sent
    after_step: Callable[[], None] = lambda: None
    finish: Callable[[], None] = lambda: None  # leaves identical weights on every rank
    one_batch: bool = False  # every rank trains on the same batch (its samples count once, on rank 0)

    @property
    def bytes_sent(self) -> int:
        return self.counter.bytes_sent


def build(strategy: Strategy, options: dict[str, Any], model: nn.Module,
          device_ids: list[int] | None, bucket_view: bool = False,
          emulation: dict[str, Any] | None = None, nodes: int = 1, precision: str = "fp32") -> TrainingStrategy:
    """Wrap ``model`` for ``strategy`` with its (already validated) options; ``bucket_view``: the gradients
    are views of DDP's buckets (no copy of them apart: an emulated rank's memory, 102 MB for ResNet-50);
    ``emulation``: an emulated cluster's, made smaller (gpus_per_rank, gradient_scale: emulated_host.py), of
    ``nodes`` hosts; ``precision``: the run's (an emulated FSDP rank gathers its parameters in its half)."""
    emulation = emulation or {}
    if strategy in (Strategy.FSDP, Strategy.TENSOR_PARALLEL):  # no DDP
        return _without_ddp(strategy, options, model, device_ids, emulation, nodes, precision)
    ddp = DDP(model, device_ids=device_ids, gradient_as_bucket_view=bucket_view, **emulated_host.ddp_options(emulation))
    dense = dense_bytes(model)
    if strategy == Strategy.ALLREDUCE:
        # DDP's built-in C++ allreduce, untouched (no Python hook in the way of the measurement):
        # it allreduces every gradient every step, so the bytes are known without counting
        counter = DenseEveryStep(dense)
        if emulated_host.times_host(emulation):  # the in-host reduction timed beside the real allreduce
            ddp.register_comm_hook(emulated_host.InHost(emulation, dist.get_world_size(), nodes), emulated_host.in_host_hook)
        return TrainingStrategy(ddp, dense, counter, after_step=counter.after_step)
    if strategy in (Strategy.FP16, Strategy.BF16):
        hook = default_hooks.fp16_compress_hook if strategy == Strategy.FP16 else default_hooks.bf16_compress_hook
        counter = ByteCount(hook, lambda _, b: b.buffer().numel() * 2)
        ddp.register_comm_hook(None, counter)
        return TrainingStrategy(ddp, dense, counter)
    if strategy == Strategy.POWERSGD:
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=options["rank"],
            start_powerSGD_iter=options["start_iter"], use_error_feedback=options["error_feedback"],
            warm_start=options["error_feedback"])
        counter = ByteCount(powerSGD_hook.powerSGD_hook, powersgd_bytes)
        ddp.register_comm_hook(state, counter)
        return TrainingStrategy(ddp, dense, counter)
    if strategy == Strategy.ONEBIT:
        state = OnebitState(error_feedback=options["error_feedback"])
        ddp.register_comm_hook(state, onebit_hook)
        return TrainingStrategy(ddp, dense, state)
    if strategy == Strategy.HIERARCHICAL:
        hierarchy = hierarchical.build_hierarchy(options["local_size"])
        ddp.register_comm_hook(hierarchy, hierarchical.hierarchical_hook)
        return TrainingStrategy(ddp, dense, hierarchy)
    # Model-averaging strategies: gradients stay local (no-op hook), parameters are averaged.
    ddp.register_comm_hook(None, noop_hook)
    if strategy == Strategy.LOCAL_SGD:
        local = LocalSgd(model, options["tau"])
        return TrainingStrategy(ddp, dense, local, after_step=local.after_step, finish=local.finish)
    if strategy == Strategy.BMUF:
        bmuf = BlockMomentum(model, options["block_steps"], options["block_momentum"], options["block_lr"],
                             options["nesterov"])
        return TrainingStrategy(ddp, dense, bmuf, after_step=bmuf.after_step, finish=bmuf.finish)
    raise ValueError(f"no PyTorch implementation of strategy {strategy.value}")


def _without_ddp(strategy: Strategy, options: dict[str, Any], model: nn.Module, device_ids: list[int] | None,
                 emulation: dict[str, Any], nodes: int, precision: str) -> TrainingStrategy:
    """FSDP (sharded in place by FSDP2; an emulated rank's collectives timed) and tensor parallelism (every rank
    holds a part of every layer), which wrap no DDP."""
    # FSDP and tensor parallelism are imported here, by the runs that use them: torch.distributed.fsdp
    # and .tensor add about 1 s to every rank's start-up on 2 cores (as much as importing torch)
    if strategy == Strategy.FSDP:  # sharded, no DDP: FSDP2 shards the model in place
        from frameworks.torch_ddp.strategies import fsdp

        sharded = (fsdp.shard_emulated(model, options["reshard_after_forward"], precision, emulation, nodes)
                   if emulation else fsdp.shard(model, options["reshard_after_forward"], "cuda" if device_ids else "cpu"))
        return TrainingStrategy(model, dense_bytes(model), sharded, after_step=sharded.after_step)
    from frameworks.torch_ddp.strategies import tensor_parallel

    counter = tensor_parallel.parallelize(model, "cuda" if device_ids else "cpu")  # a part of every layer
    return TrainingStrategy(model, dense_bytes(model), counter, one_batch=True)


class LocalSgd:
    """SparkNet-style parameter averaging every ``tau`` local steps with PyTorch's PeriodicModelAverager.

    The averager averages on its calls w, w + tau, w + 2 tau, ... (0-based) after ``warmup_steps``
    w; w = tau - 1 makes that after local steps tau, 2 tau, ... (1-based)."""

    def __init__(self, model: nn.Module, tau: int):
        self.model, self.tau = model, tau
        self.averager = PeriodicModelAverager(period=tau, warmup_steps=tau - 1)
        self.steps = 0
        self.bytes_sent = 0  # bytes this worker handed to all_reduce

    def after_step(self) -> None:
        self.averager.average_parameters(self.model.parameters())
        self.steps += 1
        if self.steps % self.tau == 0:
            self.bytes_sent += dense_bytes(self.model)

    def finish(self) -> None:
        """Average the local steps since the last averaging, if any."""
        if self.steps % self.tau:
            average_parameters(iter(self.model.parameters()), None)
