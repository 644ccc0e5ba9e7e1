"""What Horovod adds to a PyTorch rank: its DistributedOptimizer (gradients averaged by allreduce, fp32 or
fp16 on the wire) with a compressor that counts the bytes, rank 0's start broadcast, and which controller
the launcher chose. Used by the worker, the probe and benchmarks/bare_loops/horovod_torch.py."""

from __future__ import annotations

import time
from typing import Callable

import horovod.torch as hvd
import torch

from frameworks.shared import mpi_job
from harness.contract.axes import Strategy


class CountingCompression:
    """A Horovod compressor that adds the bytes of every tensor it hands to allreduce to ``bytes_sent``."""

    def __init__(self, inner: type[hvd.Compression.none]):
        self.inner, self.bytes_sent = inner, 0

    def compress(self, tensor: torch.Tensor) -> tuple[torch.Tensor, object]:
        compressed, context = self.inner.compress(tensor)
        # Horovod's allreduce takes contiguous tensors only: a channels-last weight's gradient is copied
        # (the averaged result replaces the gradient, the optimizer does not mind its layout)
        compressed = compressed.contiguous()
        self.bytes_sent += compressed.numel() * compressed.element_size()
        return compressed, context

    def decompress(self, tensor: torch.Tensor, context: object) -> torch.Tensor:
        return self.inner.decompress(tensor, context)


COMPRESSION = {Strategy.ALLREDUCE: hvd.Compression.none, Strategy.FP16: hvd.Compression.fp16}


def controller() -> str:
    """Which Horovod controller this process runs under (the launcher chose it)."""
    return "mpi" if hvd.mpi_enabled() else "gloo"


def distributed_optimizer(optimizer: torch.optim.Optimizer, model: torch.nn.Module,
                          strategy: Strategy) -> tuple[torch.optim.Optimizer, CountingCompression]:
    """Horovod's DistributedOptimizer around ``optimizer`` (gradients averaged), and its byte counter."""
    compression = CountingCompression(COMPRESSION[strategy])
    wrapped = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                       compression=compression, op=hvd.Average)
    return wrapped, compression


def broadcast_from_root(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Start every rank from rank 0's weights (and optimizer state, where there is any).

    Horovod's broadcast_optimizer_state, given an optimizer with no state yet, first takes an
    optimizer step on zero gradients to create it: with weight decay that step moves the weights and
    seeds SGD's momentum (AdamW's step count), which would make this worker's training differ from
    the recipe every framework follows. A fresh optimizer has nothing to broadcast, so it is called
    only once there is state (a resumed optimizer).
    """
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    if optimizer.state_dict()["state"]:
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)


def build_facts() -> dict[str, str]:
    """What this Horovod wheel was built with, for the row's versions (``horovod_build``)."""
    return {"horovod_build": mpi_job.horovod_build(hvd.nccl_built(), hvd.cuda_built(), hvd.mpi_built(),
                                                   hvd.gloo_built())}


def scaled_step(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, loss: torch.Tensor,
                after_backward: Callable[[], None] = lambda: None) -> None:
    """Backward and update through Horovod's DistributedOptimizer, with loss scaling where the scaler is on
    (float16 on a GPU): Horovod's documented order, the allreduces synchronized before the scaler's step
    unscales and checks the averaged gradients. ``after_backward`` is called when backward has returned
    (its allreduces enqueued, maybe not done), before the wait for them."""
    if not scaler.is_enabled():
        loss.backward()
        after_backward()
        optimizer.step()
        return
    scaler.scale(loss).backward()
    after_backward()
    optimizer.synchronize()
    with optimizer.skip_synchronize():
        scaler.step(optimizer)
    scaler.update()


def emulated_exchange(optimizer: torch.optim.Optimizer, poll_s: float) -> None:
    """After an emulated backward: the averaged gradients in place, no update (an emulated accelerator's
    update is inside its profiled time: frameworks/shared/pytorch/emulated_gradients.py); ``poll_s``: seconds
    between polls of the pending allreduces (frameworks.shared.emulated_clock.wait_poll_s)."""
    wait_sleeping(optimizer, poll_s)
    optimizer.synchronize()
    optimizer._synchronized = False  # what step() resets after its synchronize: the next backward is a new step


def wait_sleeping(optimizer: torch.optim.Optimizer, interval_s: float) -> None:
    """Wait for the DistributedOptimizer's outstanding allreduces by polling them between short sleeps.

    For emulated accelerators (device emulated, exchange gradients), whose ranks share this machine's few
    cores: Horovod's own wait (``synchronize``) spins on ``std::this_thread::yield()`` (horovod/torch/
    mpi_ops_v2.cc, WaitAndClear), and 16 spinning ranks on 2 cores would take the CPU from the ranks that
    are copying and reducing. A GPU rank waits on its stream instead, so the spin is this machine's, not
    the emulated cluster's. ``_handles`` (parameter -> (handle, context)) is the optimizer's own record of
    what backward enqueued; the synchronize that follows finds them done."""
    for handle, _ in list(getattr(optimizer, "_handles", {}).values()):
        while handle is not None and not hvd.poll(handle):
            time.sleep(interval_s)
