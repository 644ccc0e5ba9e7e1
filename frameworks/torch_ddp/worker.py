"""PyTorch DDP worker: one process per rank, started by torchrun through harness.contract.worker."""

from __future__ import annotations

import os
import platform
import resource
import time
from typing import Any, Callable

import torch
import torch.distributed as dist

from frameworks.image_input import StallMeter
from frameworks.torch_ddp import checkpointing, digits, emulated, numerics, plain, strategies
from frameworks.torch_ddp.models import parameter_count
from frameworks.torch_ddp.strategies import dense_bytes
from frameworks.torch_ddp.training import (
    build_model,
    make_optimizer,
    synthetic_batch,
    training_step,
    weights_checksum,
)
from harness.contract.axes import Compile, Device, Storage, Strategy, Workload
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec


def resolve_device(requested: Device) -> str:
    if requested == Device.CUDA and not torch.cuda.is_available():
        raise RuntimeError("device cuda requested but torch.cuda.is_available() is False")
    if requested == Device.CPU or not torch.cuda.is_available():
        return "cpu"
    return "cuda"


def versions() -> dict[str, str]:
    found = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import transformers

        found["transformers"] = transformers.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        found["cuda"] = str(torch.version.cuda)
        found["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        found["cudnn"] = str(torch.backends.cudnn.version())
    return found


def gpu_facts(device: str) -> dict[str, str | None]:
    if device != "cuda":
        return {"gpu_model": None, "gpu_count": 0}
    return {"gpu_model": torch.cuda.get_device_name(), "gpu_count": torch.cuda.device_count()}


def batch_source(spec: RunSpec, rank: int, world: int, device: torch.device
                 ) -> tuple[Callable[[], dict[str, torch.Tensor]], StallMeter | None, Any]:
    """Where each step's batch comes from (shared with horovod_torch): the digits training stream, real
    data through the input pipeline (with its stall meter), or the one synthetic batch; and the digits data
    for evaluation (None for the other workloads)."""
    if spec.workload == Workload.DIGITS:
        data = digits.load(device)
        stream = digits.batches(data, rank, world, spec.batch_per_worker, spec.seed)
        return (lambda: next(stream)), None, data
    if spec.storage != Storage.SYNTHETIC:  # resnet50 images (files or tar shards), bert token partitions
        from frameworks.torch_ddp.input_pipeline import Pipeline

        pipeline = Pipeline(spec, rank, world)
        if spec.storage.fills_cache:
            pipeline.fill_cache()
        meter = StallMeter(pipeline)  # seconds each step waited for its batch

        def fetch() -> dict[str, torch.Tensor]:
            return {k: v.to(device, non_blocking=True) for k, v in pipeline.next_batch().items()}
        return (lambda: numerics.batch_to_memory_format(spec, meter.next_batch(fetch))), meter, None
    batch = numerics.batch_to_memory_format(spec, synthetic_batch(spec, rank, device))
    return (lambda: batch), None, None


class StepLedger:
    """What a PyTorch worker (DDP or Horovod) records around its training loop: the bytes its gradient
    exchange sent after each step, the input pipeline's counters when the window starts, the digits
    evaluations, then the window's data and comm records and the closing end record."""

    def __init__(self, spec: RunSpec, events: EventWriter, model: torch.nn.Module, meter: StallMeter | None,
                 data: Any, bytes_sent: Callable[[], int]):
        self.spec, self.events, self.model, self.meter, self.data = spec, events, model, meter, data
        self.bytes_sent = bytes_sent
        self.bytes_after = [0]  # cumulative bytes sent after each step (index = steps done)
        self.note_window = meter.between_steps(spec.warmup_steps) if meter else (lambda done: None)

    def between_steps(self, done: int) -> None:
        """After ``done`` steps (run_measured_loop's hook)."""
        self.bytes_after.append(self.bytes_sent())
        self.note_window(done)  # the input pipeline's counters when the measured window starts
        if self.spec.workload == Workload.DIGITS and done % int(self.spec.workload_options["eval_every"]) == 0:
            accuracy, loss = digits.evaluate(self.model, self.data)
            self.events.emit("eval", step=done, accuracy=accuracy, loss=loss)

    def after_window(self, window: Any, dense_bytes_per_step: int, **comm_facts: Any) -> None:
        """The data record (a loader-only pass after the window never competes with training) and the
        comm record: bytes per measured step, what a dense exchange of the gradients would send, and
        what a strategy adds (``comm_facts``: a pipeline's activation bytes and idle fraction)."""
        if self.meter is not None:
            self.events.emit("data", **self.meter.record(window, self.spec.measured_steps))
        measured = self.bytes_after[-1] - self.bytes_after[self.spec.warmup_steps]
        self.events.emit("comm", bytes_per_step=measured / self.spec.measured_steps,
                         dense_bytes_per_step=dense_bytes_per_step, **comm_facts)

    def end(self) -> None:
        """The end record: the weights' checksum (compared across ranks), parameters, layout, accuracy."""
        facts = {}
        if self.spec.workload == Workload.DIGITS:
            facts["final_accuracy"] = digits.evaluate(self.model, self.data)[0]
        # the worker process's peak resident memory since it started (Linux: ru_maxrss in KiB)
        facts["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        self.events.emit("end", weights_checksum=weights_checksum(self.model),
                         parameters=parameter_count(self.model), layout=numerics.image_layout(self.model), **facts)


def main(spec: RunSpec, events: EventWriter) -> None:
    if spec.device == Device.EMULATED:  # the real loader, a profiled sleep per step, no model
        emulated.main(spec, events, batch_source, versions())
        return
    if spec.strategy in strategies.WITHOUT_DDP:
        from frameworks.torch_ddp import async_training  # it builds on this module: imported here, not above

        return async_training.main(spec, events)  # no DDP: parameter servers or a shared-memory model
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device_kind = resolve_device(spec.device)
    numerics.check_device(spec, device_kind)
    numerics.set_matmul_precision(spec)
    if spec.strategy == Strategy.BF16 and device_kind != "cuda":
        # device "auto" found no GPU; the harness refuses device "cpu" before launching
        events.emit("skip", reason="strategy bf16 needs CUDA and NCCL (bf16_compress_hook); no GPU here")
        return
    if device_kind == "cuda":
        torch.cuda.set_device(local_rank)
    device = torch.device(device_kind, local_rank) if device_kind == "cuda" else torch.device("cpu")
    dist.init_process_group(backend="nccl" if device_kind == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    events.hello(world, device_kind, versions(), backend=dist.get_backend(),
                 torch_threads=torch.get_num_threads(), **gpu_facts(device_kind))

    torch.manual_seed(spec.seed)
    model = numerics.to_memory_format(spec, build_model(spec.workload, dict(spec.workload_options)).to(device))
    if spec.strategy == Strategy.PIPELINE:
        return train_pipelined(spec, events, model, device)
    if spec.strategy == Strategy.HYBRID:
        from frameworks.torch_ddp import hybrid  # it builds on this module: imported here, not above

        return hybrid.train(spec, events, model, device, [local_rank] if device_kind == "cuda" else None)
    strategy = strategies.build(spec.strategy, dict(spec.strategy_options), model,
                                [local_rank] if device_kind == "cuda" else None)
    optimizer = make_optimizer(spec, strategy.module)
    # data parallelism: this rank's share; tensor parallelism: the one batch every rank works on
    next_batch, meter, data = batch_source(spec, *((0, 1) if strategy.one_batch else (rank, world)), device)
    samples_per_step = 0 if strategy.one_batch and rank > 0 else spec.batch_per_worker
    trained = numerics.maybe_compile(spec, strategy.module)
    step = training_step(spec, trained, optimizer, device_kind, next_batch, strategy.after_step)

    ledger = StepLedger(spec, events, model, meter, data, lambda: strategy.bytes_sent)

    sync = torch.cuda.synchronize if device_kind == "cuda" else (lambda: None)
    if spec.compile == Compile.ON:  # compilation happens in the first call: time it apart, before warm-up
        t0 = time.perf_counter()
        step()
        sync()
        events.emit("compile", seconds=time.perf_counter() - t0)
    window = run_measured_loop(step, sync=sync, barrier=dist.barrier, warmup_steps=spec.warmup_steps,
                      measured_steps=spec.measured_steps, samples_per_step=samples_per_step,
                      events=events, loss_value=lambda t: float(t.item()), between_steps=ledger.between_steps)
    ledger.after_window(window, strategy.dense_bytes_per_step)
    if plain.applies(spec, world):
        plain.measure(spec, events, device, device_kind, next_batch, sync)
    strategy.finish()  # model-averaging strategies: the final consensus model on every rank
    if spec.storage != Storage.SYNTHETIC:
        checkpointing.phase(spec, events, rank, world, model)
    ledger.end()
    dist.barrier()
    dist.destroy_process_group()


def train_pipelined(spec: RunSpec, events: EventWriter, model: torch.nn.Module, device: torch.device) -> None:
    """One pipeline stage per rank (pipeline.py). Every stage reads the same batches (the first uses the
    inputs, the last the labels); the samples are counted once, on the last stage, where they leave."""
    # imported by the runs that use it: torch.distributed.pipelining adds ~0.5 s to a rank's start-up
    from frameworks.torch_ddp.pipeline import Pipeline, gpipe_bubble, idle_meter

    rank, world = dist.get_rank(), dist.get_world_size()
    options = dict(spec.strategy_options)
    if spec.compile == Compile.ON:
        events.emit("skip", reason="strategy pipeline does not compile its stages (compile = off only)")
        dist.destroy_process_group()
        return
    if spec.batch_per_worker % options["microbatches"]:
        raise ValueError(f"strategy pipeline: microbatches {options['microbatches']} does not divide "
                         f"batch_per_worker {spec.batch_per_worker}")
    next_batch, meter, data = batch_source(spec, 0, 1, device)
    # an example batch for the stages' shapes: digits has no synthetic batch, its training images do
    example = {"x": data.train_x[:spec.batch_per_worker]} if data is not None else synthetic_batch(spec, 0, device)
    pipe = Pipeline(spec.workload, model, options, device, example)
    optimizer = make_optimizer(spec, pipe.clock)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = pipe.step(next_batch())
        optimizer.step()
        return loss

    ledger = StepLedger(spec, events, model, meter, data, lambda: pipe.bytes_sent)
    start: dict[str, Any] = {}  # the stage's counters when the measured window starts

    def mark_window_start() -> None:
        start.update(idle=idle_meter(pipe.clock), p2p=pipe.clock.p2p_bytes)

    if spec.warmup_steps == 0:
        mark_window_start()

    def between_steps(done: int) -> None:
        if done == spec.warmup_steps:
            mark_window_start()
        if spec.workload == Workload.DIGITS and done % int(spec.workload_options["eval_every"]) == 0:
            pipe.gather_model()  # evaluation runs the whole model on every rank
        ledger.between_steps(done)

    window = run_measured_loop(step, sync=lambda: None, barrier=dist.barrier, warmup_steps=spec.warmup_steps,
                               measured_steps=spec.measured_steps,
                               samples_per_step=spec.batch_per_worker if pipe.last else 0, events=events,
                               loss_value=lambda t: float(t.item()), between_steps=between_steps)
    ledger.after_window(window, dense_bytes(pipe.clock), stage=rank, stages=world,
                        p2p_bytes_per_step=(pipe.clock.p2p_bytes - start["p2p"]) / spec.measured_steps,
                        idle_fraction=start["idle"](window["seconds"]),
                        bubble_predicted=gpipe_bubble(world, options["microbatches"]), **pipe.stage_facts())
    pipe.gather_model()
    ledger.end()
    dist.barrier()
    dist.destroy_process_group()
