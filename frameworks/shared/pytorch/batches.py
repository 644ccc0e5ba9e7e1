"""Where a PyTorch rank's batches come from (torch_ddp's loops, horovod_torch's, the emulated rank's)."""

from __future__ import annotations

from typing import Any, Callable

import torch

from frameworks.shared.image_input import StallMeter
from frameworks.shared.pytorch import digits, numerics
from frameworks.shared.pytorch.training import synthetic_batch
from harness.contract.axes import Storage, Workload
from harness.contract.spec import RunSpec


def batch_source(spec: RunSpec, rank: int, world: int, device: torch.device
                 ) -> tuple[Callable[[], dict[str, torch.Tensor]], StallMeter | None, Any]:
    """Where each step's batch comes from: the digits training stream, real data through the input
    pipeline (with its stall meter), or the one synthetic batch; and the digits data for evaluation
    (None for the other workloads)."""
    if spec.workload == Workload.DIGITS:
        data = digits.load(device)
        stream = digits.batches(data, rank, world, spec.batch_per_worker, spec.seed)
        return (lambda: next(stream)), None, data
    if spec.storage != Storage.SYNTHETIC:  # resnet50 images (files or tar shards), bert token partitions
        # imported by the runs that read real data: the DataLoader, Pillow and the storage readers
        from frameworks.shared.pytorch.input_pipeline import Pipeline

        pipeline = Pipeline(spec, rank, world)
        if spec.storage.fills_cache:
            pipeline.fill_cache()
        meter = StallMeter(pipeline)  # seconds each step waited for its batch

        def fetch() -> dict[str, torch.Tensor]:
            return {k: v.to(device, non_blocking=True) for k, v in pipeline.next_batch().items()}
        return (lambda: numerics.batch_to_memory_format(spec, meter.next_batch(fetch))), meter, None
    batch = numerics.batch_to_memory_format(spec, synthetic_batch(spec, rank, device))
    return (lambda: batch), None, None
