"""PyTorch DDP worker: one process per rank, started by torchrun through harness.contract.worker.

The entry point only: it picks the loop the run's device and strategy take. The loops live in library
modules: training_loop.py (the strategies that wrap the model), strategies/ (the pipeline, the hybrid,
and the loop of the strategies without DDP), frameworks/shared/pytorch/emulated_device.py (device emulated,
MLPerf Storage's barrier); device emulated with real gradients takes training_loop.py with the emulated
model of frameworks/shared/pytorch/emulated_gradients.py.
"""

from __future__ import annotations

from frameworks.shared.pytorch import emulated_device, emulated_gradients
from frameworks.torch_ddp import training_loop
from frameworks.torch_ddp.strategies import async_training, hybrid
from frameworks.torch_ddp.strategies.wrapping import WITHOUT_DDP
from harness.contract.axes import Device, Strategy
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec


def main(spec: RunSpec, events: EventWriter) -> None:
    if spec.device == Device.EMULATED and not emulated_gradients.applies(spec):
        return emulated_device.main(spec, events)  # the real loader, a profiled sleep per step, no model
    if spec.strategy in WITHOUT_DDP:  # no DDP: parameter servers or a shared-memory model
        return async_training.main(spec, events)
    started = training_loop.start(spec, events)
    if started is None:
        return
    if spec.strategy == Strategy.PIPELINE:
        # imported by the runs that use it: torch.distributed.pipelining adds ~0.5 s to a rank's start-up
        from frameworks.torch_ddp.strategies import pipeline_parallel

        return pipeline_parallel.train(spec, events, started.model, started.device)
    if spec.strategy == Strategy.HYBRID:
        return hybrid.train(spec, events, started.model, started.device, started.device_ids)
    training_loop.train(spec, events, started)
