"""Collective microbenchmark worker (``rosetta comm``): torch.distributed with gloo, NCCL or MPI.

Started like a training worker (launcher -> ``python -m harness.contract.worker`` -> here).
For every collective and message size: warm-up iterations, a barrier, then every
timed iteration on its own clock, the device synchronized before each clock read,
each iteration's seconds recorded raw in a ``comm`` event record. The harness
takes, per iteration, the slowest rank's time.
"""

from __future__ import annotations

import os
import platform
import time

import torch
import torch.distributed as dist

from harness.contract.axes import Collective
from harness.contract.events import EventWriter
from harness.contract.spec import ELEMENT_BYTES, CommSpec


def _collective(kind: Collective, size_bytes: int, world: int, device: torch.device, root: int = 0):
    """A zero-argument function running one ``kind`` of ``size_bytes`` (nccl-tests' size convention);
    a broadcast is sent from rank ``root``."""
    if kind == Collective.ALLGATHER:
        per_rank = size_bytes // (ELEMENT_BYTES * world)
        send = torch.ones(per_rank, dtype=torch.float32, device=device)
        recv = torch.empty(per_rank * world, dtype=torch.float32, device=device)
        return lambda: dist.all_gather_into_tensor(recv, send)
    buf = torch.ones(size_bytes // ELEMENT_BYTES, dtype=torch.float32, device=device)
    if kind == Collective.BROADCAST:
        return lambda: dist.broadcast(buf, src=root)
    return lambda: dist.all_reduce(buf)


def main(spec: CommSpec, events: EventWriter) -> None:
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if spec.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        sync = torch.cuda.synchronize
    else:
        device, sync = torch.device("cpu"), (lambda: None)  # gloo's CPU collectives return when done
    dist.init_process_group(backend=spec.backend.value)
    world = dist.get_world_size()
    versions = {"torch": torch.__version__, "python": platform.python_version()}
    gpu = {"gpu_model": None, "gpu_count": 0}
    if spec.device == "cuda":
        versions.update(cuda=str(torch.version.cuda), nccl=".".join(map(str, torch.cuda.nccl.version())))
        gpu = {"gpu_model": torch.cuda.get_device_name(), "gpu_count": torch.cuda.device_count()}
    events.hello(world, spec.device, versions, backend=dist.get_backend(), **gpu)
    clock = time.perf_counter
    for kind in spec.collectives:
        for size, iters in zip(spec.sizes, spec.iters):
            if kind == Collective.ALLGATHER and size < ELEMENT_BYTES * world:
                continue  # each rank must contribute at least one element
            op = _collective(kind, size, world, device, spec.root)
            for _ in range(spec.warmup_iters):
                op()
            sync()
            dist.barrier()
            times = []
            for _ in range(iters):
                t0 = clock()
                op()
                sync()
                times.append(clock() - t0)
            events.emit("comm", collective=kind.value, bytes=size, iters=iters, seconds=times)
    events.emit("end", weights_checksum=None)
    dist.barrier()
    dist.destroy_process_group()
