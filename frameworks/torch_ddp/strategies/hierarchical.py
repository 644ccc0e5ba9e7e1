"""Hierarchical allreduce as an explicit strategy (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE, done by hand).

The ranks form hosts of ``local_size`` consecutive ranks. Every gradient bucket is

    1. reduce-scattered within the host (each local rank ends with the host's sum of 1/local_size of it),
    2. allreduced across hosts, between the ranks with the same local rank (1/local_size of the bytes
       cross the slow inter-host link, once per host instead of once per rank),
    3. all-gathered within the host, and divided by the world size,

so every rank ends with the same average as a flat allreduce (up to the order of float additions).
The groups are torch.distributed process subgroups, so this runs on gloo and NCCL alike.
"""

import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

# What launchers say about the ranks on this host: torchrun, then Open MPI, then SLURM's srun.
LOCAL_SIZE_VARIABLES = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")


def local_size_from_launcher(world: int) -> int:
    """Ranks per host as the launcher set it (the whole world when no launcher says)."""
    for name in LOCAL_SIZE_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return world


@dataclass
class Hierarchy:
    """This rank's two subgroups: its host (``local``) and its peers on the other hosts (``cross``)."""

    local_size: int
    local: dist.ProcessGroup
    cross: dist.ProcessGroup
    bytes_sent: int = 0  # payload this rank handed to the collectives of groups larger than itself
    inter_host_bytes: int = 0  # of which: handed to the cross-host allreduce
    hosts: int = field(init=False)

    def __post_init__(self) -> None:
        self.hosts = dist.get_world_size() // self.local_size


def build_hierarchy(local_size: int) -> Hierarchy:
    """Create the subgroups (every rank must call this, in the same order). ``local_size`` 0 means: ask
    the launcher. Hosts are blocks of consecutive ranks, as torchrun and mpirun number them."""
    world, rank = dist.get_world_size(), dist.get_rank()
    local_size = local_size or local_size_from_launcher(world)
    if world % local_size:
        raise ValueError(f"strategy hierarchical: local_size {local_size} does not divide the world size {world}")
    local, _ = dist.new_subgroups(group_size=local_size)
    crosses = [list(range(i, world, local_size)) for i in range(local_size)]
    cross, _ = dist.new_subgroups_by_enumeration(crosses)
    assert rank in crosses[rank % local_size]
    return Hierarchy(local_size, local, cross)


def hierarchical_average(state: Hierarchy, flat: torch.Tensor) -> torch.Tensor:
    """The world's average of ``flat`` (a 1-D tensor) by reduce-scatter, allreduce, all-gather."""
    n, size = flat.numel(), state.local_size
    padded = torch.nn.functional.pad(flat, (0, (-n) % size))  # reduce-scatter needs equal chunks
    chunk = torch.empty(padded.numel() // size, dtype=flat.dtype, device=flat.device)
    dist.reduce_scatter_single(chunk, padded, group=state.local)
    dist.all_reduce(chunk, group=state.cross)
    gathered = torch.empty_like(padded)
    dist.all_gather_single(gathered, chunk, group=state.local)
    # payload counted only where a group has someone to send to (one rank a host: no local steps;
    # one host: no inter-host step)
    chunk_bytes = chunk.numel() * chunk.element_size()
    local = padded.numel() * padded.element_size() + chunk_bytes if size > 1 else 0
    inter = chunk_bytes if state.hosts > 1 else 0
    state.bytes_sent += local + inter
    state.inter_host_bytes += inter
    return gathered[:n] / dist.get_world_size()


def hierarchical_hook(state: Hierarchy, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket averaged hierarchically (synchronously inside the hook, like
    onebit's: simple, and it gives up overlapping this bucket with the rest of the backward pass)."""
    buffer = bucket.buffer()
    buffer.copy_(hierarchical_average(state, buffer))
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(buffer)
    return future
