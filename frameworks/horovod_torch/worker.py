"""Horovod PyTorch worker: one process per rank, started by horovodrun (Gloo or MPI controller) or mpirun.

The model, synthetic batch, optimizer and loss are the PyTorch ones of the equivalence contract
(frameworks.shared.pytorch.training), so the only difference from PyTorch DDP is the gradient exchange:
Horovod's DistributedOptimizer allreduces each gradient as backward produces it (fp32, or fp16 with
``strategy = "fp16"``) and averages. On a GPU node each rank takes the GPU of its local rank and Horovod
exchanges GPU tensors with NCCL; a Horovod built without NCCL there makes the run a skipped row saying how to
build one. With ``device = "emulated"`` no model is built: PyTorch DDP's
emulated rank (frameworks/shared/pytorch/emulated_device.py: the DataLoader, a profiled sleep per step) with
Horovod's barrier and broadcast; with ``exchange = "gradients"`` the emulated model
(frameworks/shared/pytorch/emulated_gradients.py) hands its gradients to Horovod's hooks at the profiled times.
"""

from __future__ import annotations

import os

import horovod
import horovod.torch as hvd
import torch

from frameworks.horovod_torch.distributed import (
    broadcast_from_root,
    build_facts,
    controller,
    distributed_optimizer,
    emulated_exchange,
    scaled_step,
)
from frameworks.shared import emulated_clock, mpi_job
from frameworks.shared.pass_timing import BACKWARD, EXCHANGE, FORWARD, PassTimer, timed_on
from frameworks.shared.pytorch import emulated_device, emulated_gradients, numerics
from frameworks.shared.pytorch.batches import batch_source
from frameworks.shared.pytorch.ledger import StepLedger
from frameworks.shared.pytorch.runtime import device_memory, gpu_facts, resolve_device, versions
from frameworks.shared.pytorch.training import build_model, dense_bytes, loss_of, make_optimizer
from harness.contract.axes import Device
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec
from harness.contract.workloads import samples_per_step
from harness.machines import emulation


def main(spec: RunSpec, events: EventWriter) -> None:
    mpi_job.check_started_as_one_job(os.environ)
    if spec.device == Device.EMULATED and emulated_gradients.applies(spec):
        os.environ.update(emulated_clock.horovod_environment(spec.emulation, os.environ))
    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    mpi_job.check_world(world, spec.world_size, "Horovod")
    found = {**versions(), "horovod": horovod.__version__, **build_facts()}
    emulated = spec.device == Device.EMULATED
    if emulated and not emulated_gradients.applies(spec):  # the real loader, a profiled sleep, hvd.barrier()
        events.hello(world, "emulated", found, backend=f"horovod-{controller()}", torch_threads=torch.get_num_threads(),
                     **emulation.hello_facts(spec))
        emulated_device.run(spec, events, rank, world, hvd.barrier,
                     lambda token: hvd.broadcast_object(token, root_rank=0))
        hvd.shutdown()
        return
    device = torch.device("cpu") if emulated else rank_device(spec, events)
    if device is None:
        hvd.shutdown()
        return
    on_gpu = device.type == "cuda"
    facts = emulation.hello_facts(spec) if emulated else gpu_facts(device.type)
    events.hello(world, "emulated" if emulated else device.type, found, backend=f"horovod-{controller()}",
                 torch_threads=torch.get_num_threads(), **facts, strategy_note=mpi_job.hierarchical_not_applied(
                     os.environ, bool(hvd.nccl_built()), on_gpu=on_gpu, nodes=hvd.cross_size()))
    train(spec, events, rank, world, device)
    hvd.shutdown()


def rank_device(spec: RunSpec, events: EventWriter) -> torch.device | None:
    """The CPU, or this rank's GPU (its local rank's) where the run is on CUDA and Horovod can exchange GPU
    tensors; None (a skip record said why) where it cannot."""
    device_kind = resolve_device(spec.device)
    if device_kind == "cuda" and not hvd.nccl_built():
        events.emit("skip", reason=mpi_job.NO_NCCL)
        return None
    numerics.check_device(spec, device_kind)
    numerics.set_matmul_precision(spec)
    if device_kind != "cuda":
        return torch.device("cpu")
    torch.cuda.set_device(hvd.local_rank())
    return torch.device("cuda", hvd.local_rank())


def train(spec: RunSpec, events: EventWriter, rank: int, world: int, device: torch.device) -> None:
    """Build, broadcast and wrap the model, run the measured loop on ``device``, and record its end."""
    torch.manual_seed(spec.seed)
    emulated = spec.device == Device.EMULATED  # real gradients at the profiled times, no math
    model = (emulated_gradients.build(spec, rank) if emulated
             else build_model(spec.workload, dict(spec.workload_options)).to(device))
    optimizer = make_optimizer(spec, model)
    broadcast_from_root(model, optimizer)  # before channels-last: Horovod broadcasts contiguous tensors only
    numerics.to_memory_format(spec, model)  # in place: the optimizer keeps the same parameters
    optimizer, compression = distributed_optimizer(optimizer, model, spec.strategy)
    dense = dense_bytes(model)

    # PyTorch DDP's batches: digits, real data through its input pipeline (this rank's share), or synthetic
    next_batch, meter, data = batch_source(spec, rank, world, device)
    scaler = numerics.grad_scaler(spec, device.type)  # float16 on a GPU: loss scaling; a no-op otherwise
    poll_s = emulated_clock.wait_poll_s(spec.emulation) if emulated else 0.0

    timer = PassTimer(spec.warmup_steps, enabled=timed_on("emulated" if emulated else device.type))

    def step() -> torch.Tensor:
        optimizer.zero_grad()  # Horovod's override takes no set_to_none; torch 2 sets to None by default
        if emulated:  # the scaler is off: no autocast, no loss scaling
            next_batch()
            timer.start()
            loss = model()
            timer.lap(FORWARD)
            loss.backward()
            timer.lap(BACKWARD)
            emulated_exchange(optimizer, poll_s)
            timer.lap(EXCHANGE)
            model.update()  # the update's share of the step, after the last gradient
            timer.finish()
            return loss.detach()
        batch = next_batch()
        timer.start()
        with numerics.autocast(spec, device.type):
            loss = loss_of(spec.workload, model, batch)
        timer.lap(FORWARD)
        # waits for the allreduces, then updates: the exchange's exposed wait and the update
        scaled_step(optimizer, scaler, loss, after_backward=lambda: timer.lap(BACKWARD))
        timer.lap(EXCHANGE)
        timer.finish()
        return loss.detach()

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    ledger = StepLedger(spec, events, model, meter, data, lambda: compression.bytes_sent)
    watch = emulated_clock.Watch(spec, model) if emulated else None
    window = run_measured_loop(step, sync=sync, barrier=hvd.barrier, warmup_steps=spec.warmup_steps,
                               measured_steps=spec.measured_steps,
                               samples_per_step=samples_per_step(spec.workload, spec.workload_options,
                                                                 spec.batch_per_worker),
                               events=events, loss_value=None if emulated else (lambda t: float(t.item())),
                               between_steps=watch.around(ledger.between_steps) if watch else ledger.between_steps,
                               device_memory=device_memory(device.type))
    ledger.after_window(window, dense)  # bytes: what the compressor handed to allreduce
    timer.record(events)
    if watch:
        watch.record(events, window)
    ledger.end()
    hvd.barrier()
