"""Emulated accelerators in PyTorch DDP and Horovod PyTorch (device emulated; MLPerf Storage's method, with
our real loader).

Each rank reads, decodes and augments its real batches through the DataLoader from the run's storage
backend exactly as a training rank does (input_pipeline.py); its step is then the profiled compute time
of an accelerator, slept, and a barrier across ranks, which stands in for the gradient allreduce: gloo's
``dist.barrier()`` here, ``hvd.barrier()`` in horovod_torch (frameworks/shared/emulated_rank.py runs the window,
its records and the checkpoint phase, the same for every framework). No model is built. After the window
the rank records what the pipeline did (the ``data`` record), the emulation's facts (AU, and whether the
machine's CPU or the rank's loader processes were saturated: the loader, not storage, then limits AU),
and, if asked, the checkpoint phase. Horovod's barrier costs more than gloo's on a busy host: its
``synchronize`` spins (poll, yield) until the background thread is done; 2 ranks on 2 cores under a
load of 7 to 14, about 18 ms per step against gloo's 0.3 ms (benchmarks/RESULTS.md), which the window
counts as a real Horovod step's wait would be.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from frameworks.shared import emulated_rank
from frameworks.shared.pytorch import checkpointing, runtime
from frameworks.shared.pytorch.batches import batch_source
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.machines import emulation


def run(spec: RunSpec, events: EventWriter, rank: int, world: int, barrier: Callable[[], None],
        broadcast: Callable[[str], str]) -> None:
    """A PyTorch rank after its hello (torch_ddp's and horovod_torch's): the DataLoader's batches
    (batches.batch_source), the window, the checkpoint phase and the end record, through the
    framework's ``barrier`` and ``broadcast`` (rank 0's string on every rank)."""
    next_batch, meter, _ = batch_source(spec, rank, world, torch.device("cpu"))
    # the DataLoader's workers are the rank's child processes: their CPU is loader_busy's
    emulated_rank.run(spec, events, rank, world, next_batch, meter,
                      int(spec.storage_options.get("loader_workers", 0)), barrier, broadcast)


def main(spec: RunSpec, events: EventWriter) -> None:
    """One emulated accelerator's rank over gloo (torch_ddp's): real batches, profiled sleeps, a barrier per step."""
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    events.hello(world, "emulated", runtime.versions(), backend="gloo", torch_threads=torch.get_num_threads(),
                 **emulation.hello_facts(spec))
    run(spec, events, rank, world, dist.barrier, checkpointing.broadcast)
    dist.destroy_process_group()
