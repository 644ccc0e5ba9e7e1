"""Hogwild (Niu et al. 2011): processes on one host update one model in shared memory without locks.

pytorch/examples' mnist_hogwild calls ``model.share_memory()`` and starts the trainers with the
``spawn`` method; here the trainers are the launcher's own processes (started fresh, as spawn
does: no forked OpenMP state), so the shared memory is a file on the host's tmpfs mapped by every
rank with ``torch.from_file(shared=True)`` (MAP_SHARED): the parameters of each rank's model are
views into that one mapping. As in mnist_hogwild, each process has its own optimizer (momentum,
if any, is per process, never shared) and ``cores // processes`` threads.

The locking variant runs the same loop with every optimizer step (the read-modify-write of the
shared weights) under an exclusive ``flock`` on the host: updates are serialized, reads are not.

Staleness: every rank counts its updates in its own slot of a second shared array (a slot has one
writer, so no lock is needed); an update's staleness is the number of updates other ranks applied
between the start of this rank's step (when its forward pass read the weights) and its own update.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

import torch
from torch import nn

SHARED_DIR = Path("/dev/shm")  # tmpfs on Linux: the mapping stays in memory


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def threads_per_process(processes: int) -> int:
    """mnist_hogwild's rule: the host's cores divided among the processes, at least one each."""
    return max(1, available_cores() // max(1, processes))


def one_host_problem(hosts: list[str]) -> str | None:
    """Why Hogwild cannot run on these ranks' hosts (None when they are all one host)."""
    distinct = sorted(set(hosts))
    if len(distinct) <= 1:
        return None
    return (f"hogwild shares one model in memory between processes of one host; this run spans "
            f"{len(distinct)} hosts ({', '.join(distinct)})")


def shared_floats(path: Path, count: int, dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``count`` values mapped MAP_SHARED from ``path`` (created, zero-filled, if absent)."""
    return torch.from_file(str(path), shared=True, size=count, dtype=dtype)


class SharedModel:
    """Makes ``model``'s parameters views into one shared mapping and counts updates per rank.

    Rank 0 must call :meth:`publish` (writes its initial weights) before the others
    :meth:`attach`; a barrier between them is the caller's."""

    def __init__(self, model: nn.Module, run_key: str, rank: int, world: int, locked: bool):
        self.model, self.rank, self.world, self.locked = model, rank, world, locked
        self.params = list(model.parameters())
        self.numel = sum(p.numel() for p in self.params)
        base = SHARED_DIR if SHARED_DIR.is_dir() else Path("/tmp")
        self.paths = {kind: base / f"rosetta-hogwild-{run_key}.{kind}" for kind in ("weights", "updates", "lock")}
        self.updates = None
        self.staleness: list[int] = []
        self._others_at_read = 0

    def publish(self) -> None:
        flat = shared_floats(self.paths["weights"], self.numel, torch.float32)
        flat.copy_(torch.cat([p.detach().reshape(-1) for p in self.params]))
        shared_floats(self.paths["updates"], self.world, torch.int64).zero_()
        self.paths["lock"].touch()

    def attach(self) -> None:
        """Point every parameter at its slice of the shared weights."""
        flat = shared_floats(self.paths["weights"], self.numel, torch.float32)
        self.updates = shared_floats(self.paths["updates"], self.world, torch.int64)
        offset = 0
        for p in self.params:
            p.data = flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
        self._lock_file = open(self.paths["lock"], "a")

    def others_updates(self) -> int:
        return int(self.updates.sum().item() - self.updates[self.rank].item())

    def before_step(self) -> None:
        """The step's forward pass is about to read the shared weights."""
        self._others_at_read = self.others_updates()

    @contextmanager
    def update(self) -> Iterator[None]:
        """Around the optimizer step: the lock (locking variant), then this rank's count and staleness."""
        with self._exclusive() if self.locked else nullcontext():
            yield
            self.staleness.append(self.others_updates() - self._others_at_read)
        self.updates[self.rank] += 1

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        fcntl.flock(self._lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)

    def close(self, remove: bool) -> None:
        """Rank 0 removes the files once every rank is done with them (the caller's barrier)."""
        self._lock_file.close()
        if remove:
            for path in self.paths.values():
                path.unlink(missing_ok=True)
