"""The single-device baseline: the same training loop without DistributedDataParallel.

NVIDIA's DeepLearningExamples (whose figures several references publish) wrap the model in DDP
only when WORLD_SIZE > 1, so their 1-GPU figure, the base of every scaling efficiency they state,
is this loop. At world size 1 the worker measures it after its DDP window, on a fresh model with
the same seed, batch, optimizer and numerics, after its own warm-up; the harness sets it beside
the DDP figure (``plain_throughput``) and divides by it by default.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from frameworks.shared.pytorch import numerics
from frameworks.shared.pytorch.training import build_model, make_optimizer, training_step
from harness.contract.axes import Compile, Strategy
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.contract.workloads import samples_per_step


def applies(spec: RunSpec, world: int) -> bool:
    """Measured where it is the same work as the DDP run: one rank, plain allreduce, no compilation."""
    return world == 1 and spec.strategy == Strategy.ALLREDUCE and spec.compile == Compile.OFF


def measure(spec: RunSpec, events: EventWriter, device: torch.device, device_kind: str,
            next_batch: Callable[[], dict[str, torch.Tensor]], sync: Callable[[], None]) -> None:
    """Warm up, then time ``measured_steps`` steps of the unwrapped model; emit the ``plain`` record
    (seconds of the window, samples, steps)."""
    torch.manual_seed(spec.seed)
    model = numerics.to_memory_format(spec, build_model(spec.workload, dict(spec.workload_options)).to(device))
    step = training_step(spec, model, make_optimizer(spec, model), device_kind, next_batch)

    for _ in range(spec.warmup_steps):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(spec.measured_steps):
        step()
    sync()
    samples = spec.measured_steps * samples_per_step(spec.workload, spec.workload_options, spec.batch_per_worker)
    events.emit("plain", seconds=time.perf_counter() - t0, samples=samples, steps=spec.measured_steps)
