"""An emulated cluster made smaller, in PyTorch DDP (device emulated, ``exchange = "gradients"``, ``[emulation]``
``gpus_per_rank`` and ``gradient_scale``: docs/scaling.md, "Beyond one rank per GPU").

``gradient_scale`` s: every parameter is 1/s of its size (emulated_gradients.scaled_model), and DDP's bucket
caps are 1/s of its defaults, so that the gradients fill as many buckets and the reducer starts as many
allreduces, at the same moments of the emulated backward; the links carry 1/s of their rate
(harness.machines.emulated_cluster.shaping), so each bucket's bandwidth term is what the full size's would be.

``gpus_per_rank`` G: the process stands for G GPUs of its host. What a ring allreduce through every GPU has
beyond the host processes' real ring (gloo, over the shaped network cards) is timed (:class:`InHost`): the
latency of its extra steps, and the in-host hops' pace where they are the slower.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Mapping

import torch
import torch.distributed as dist

from harness.machines import emulated_cluster

MIB = 1024 * 1024
DDP_BUCKET_CAP_MB = 25  # DDP's default bucket cap (MiB); its first bucket's: dist._DEFAULT_FIRST_BUCKET_BYTES


def ddp_options(emulation: Mapping[str, Any]) -> dict[str, Any]:
    """DDP's keyword arguments for the run: its bucket caps (first bucket, then the rest, MiB) at 1/s of its
    defaults under ``gradient_scale`` s; none at s = 1 (DDP's own defaults)."""
    scale = int(emulation.get("gradient_scale", 1))
    if scale == 1:
        return {}
    return {"bucket_cap_mb_list": [dist._DEFAULT_FIRST_BUCKET_BYTES / MIB / scale, DDP_BUCKET_CAP_MB / scale]}


def times_host(emulation: Mapping[str, Any]) -> bool:
    """Whether the run's processes each stand for more than one GPU (their in-host reduction timed)."""
    return int(emulation.get("gpus_per_rank", 1)) > 1


class InHost:
    """The in-host part of a ring allreduce through every GPU, for a process standing for G of them: the
    real allreduce of each bucket among the host processes (gloo, over links that
    harness.machines.emulated_cluster.shaping slowed to the whole ring's bandwidth time), then the latency
    of the ring steps it lacks (emulated_cluster.missing_ring_steps, each at the ring's slowest hop's: the
    network card's on several hosts), and never sooner than the in-host hops allow (in_host_floor_s, the
    in-host link carrying one bucket at a time); all dilated by k. A thread runs the buckets in the
    reducer's order, one after the other as gloo would, and completes each bucket's future."""

    def __init__(self, emulation: Mapping[str, Any], world: int, nodes: int):
        intra, inter = emulation.get("intra_link"), emulation.get("inter_link")
        self.intra = emulated_cluster.link(intra) if intra else None
        hop = emulated_cluster.link(inter) if inter and nodes > 1 else self.intra
        self.gpus = world * int(emulation["gpus_per_rank"])
        self.scale = int(emulation.get("gradient_scale", 1))
        self.k = float(emulation["dilation"])
        self.world = world
        self.extra_s = emulated_cluster.missing_ring_steps(world, self.gpus) * (hop.latency_s if hop else 0.0) * self.k
        self.free_at = 0.0  # when the in-host link is done with the buckets so far (perf_counter s)
        self.pending: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True, name="in-host-reduction").start()

    def floor_s(self, nbytes: int) -> float:
        """A bucket's in-host ring time (s, dilated) for ``nbytes`` of this process's (scaled) gradient."""
        return emulated_cluster.in_host_floor_s(self.intra, self.gpus, nbytes * self.scale) * self.k

    def reduce(self, bucket: dist.GradBucket) -> torch.futures.Future:
        done: torch.futures.Future = torch.futures.Future()
        self.pending.put((bucket.buffer(), done))
        return done

    def _run(self) -> None:
        while True:
            tensor, done = self.pending.get()
            start = time.perf_counter()
            self.free_at = max(start, self.free_at) + self.floor_s(tensor.numel() * tensor.element_size())
            dist.all_reduce(tensor)  # the host processes' real exchange
            remaining = max(time.perf_counter() + self.extra_s, self.free_at) - time.perf_counter()
            if remaining > 0:
                time.sleep(remaining)
            done.set_result(tensor.div_(self.world))


def in_host_hook(state, bucket):  # unannotated: DDP checks a hook's annotations as objects, not strings
    """DDP's comm hook of a process standing for several GPUs (:class:`InHost`)."""
    return state.reduce(bucket)
