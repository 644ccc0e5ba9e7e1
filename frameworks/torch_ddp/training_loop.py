"""PyTorch DDP's training loop: a rank's start (device, process group, hello, model), shared by every
strategy that trains a model here (the wrapped ones, the pipeline and the hybrid), and the measured loop of
the strategies that wrap the model (strategies/wrapping.py: DDP hooks, model averaging, FSDP, tensor
parallelism), with the single-device baseline at world size 1 and the checkpoint phase after it."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

from frameworks.shared import emulated_clock, link_probe
from frameworks.shared.pytorch import checkpointing, emulated_gradients, numerics, runtime
from frameworks.shared.pytorch.batches import batch_source
from frameworks.shared.pytorch.ddp_timing import DdpTiming
from frameworks.shared.pytorch.ledger import StepLedger
from frameworks.shared.pytorch.training import build_model, make_optimizer, training_step
from frameworks.torch_ddp import plain_baseline
from frameworks.torch_ddp.strategies import wrapping
from harness.contract.axes import Compile, Device, Storage, Strategy
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec
from harness.contract.workloads import samples_per_step
from harness.machines import emulation


@dataclass
class Rank:
    """A started rank: its process group is up, its hello said, its model built (the seed's weights)."""

    rank: int
    world: int
    device: torch.device
    model: torch.nn.Module

    @property
    def device_ids(self) -> list[int] | None:
        """DDP's device_ids: this rank's GPU, None on the CPU."""
        return [self.device.index] if self.device.type == "cuda" else None

    def sync(self) -> None:
        """Wait for the device's queued work (a no-op on the CPU)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize()


def start(spec: RunSpec, events: EventWriter) -> Rank | None:
    """Device, process group (NCCL on a GPU, gloo on the CPU), hello record and model; None when the run
    cannot run here (a skip record said why)."""
    if spec.device == Device.EMULATED:
        return _start_emulated(spec, events)
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device_kind = runtime.resolve_device(spec.device)
    numerics.check_device(spec, device_kind)
    numerics.set_matmul_precision(spec)
    if spec.strategy == Strategy.BF16 and device_kind != "cuda":
        # device "auto" found no GPU; the harness refuses device "cpu" before launching
        events.emit("skip", reason="strategy bf16 needs CUDA and NCCL (bf16_compress_hook); no GPU here")
        return None
    if device_kind == "cuda":
        torch.cuda.set_device(local_rank)
    device = torch.device(device_kind, local_rank) if device_kind == "cuda" else torch.device("cpu")
    dist.init_process_group(backend="nccl" if device_kind == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    events.hello(world, device_kind, runtime.versions(), backend=dist.get_backend(),
                 torch_threads=torch.get_num_threads(), **runtime.gpu_facts(device_kind))
    torch.manual_seed(spec.seed)
    model = numerics.to_memory_format(spec, build_model(spec.workload, dict(spec.workload_options)).to(device))
    return Rank(rank, world, device, model)


def _start_emulated(spec: RunSpec, events: EventWriter) -> Rank:
    """An emulated accelerator with real gradients: gloo, the hello, the emulated model (the real one's
    parameters under profiled, dilated sleeps: frameworks/shared/pytorch/emulated_gradients.py)."""
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    events.hello(world, "emulated", runtime.versions(), backend="gloo", torch_threads=torch.get_num_threads(),
                 **emulation.hello_facts(spec))
    torch.manual_seed(spec.seed)
    return Rank(rank, world, torch.device("cpu"), emulated_gradients.build(spec, rank))


def compile_first_step(events: EventWriter, step: Callable[[], torch.Tensor], sync: Callable[[], None]) -> None:
    """compile = on: compilation happens in the first call, timed apart (the compile record), before warm-up."""
    t0 = time.perf_counter()
    step()
    sync()
    events.emit("compile", seconds=time.perf_counter() - t0)


def _exchange_with(peer: int, nbytes: int) -> None:
    """Send ``nbytes`` to rank ``peer`` and receive as many from it at once (gloo's point-to-point)."""
    out = torch.zeros(nbytes // 4)
    into = torch.empty_like(out)
    for request in (dist.isend(out, peer), dist.irecv(into, peer)):
        request.wait()


def train(spec: RunSpec, events: EventWriter, started: Rank) -> None:
    """The measured loop of a wrapped model, the single-device baseline (world size 1), the final consensus
    model of the averaging strategies, the checkpoint phase and the end record."""
    rank, world, device, model = started.rank, started.world, started.device, started.model
    emulated = spec.device == Device.EMULATED
    # an emulated rank's gradients live in DDP's buckets: on a GPU the copy between them is the device's,
    # here it would be this machine's memory (ResNet-50's: 102 MB of a rank's 564 MB, measured)
    strategy = wrapping.build(spec.strategy, dict(spec.strategy_options), model, started.device_ids,
                              bucket_view=emulated, emulation=dict(spec.emulation) if emulated else None,
                              nodes=spec.nodes, precision=spec.precision.value)
    optimizer = make_optimizer(spec, strategy.module)
    # data parallelism: this rank's share; tensor parallelism: the one batch every rank works on
    next_batch, meter, data = batch_source(spec, *((0, 1) if strategy.one_batch else (rank, world)), device)
    # tensor parallelism: rank 0 counts the batch every rank works on; a batch's tokens where samples are tokens
    samples = 0 if strategy.one_batch and rank > 0 else samples_per_step(spec.workload, spec.workload_options,
                                                                         spec.batch_per_worker)
    samples *= int(spec.emulation.get("gpus_per_rank", 1))  # a process standing for G GPUs: their batches
    trained = numerics.maybe_compile(spec, strategy.module)
    step = (emulated_gradients.training_step(trained, model, optimizer, next_batch, strategy.after_step) if emulated
            else training_step(spec, trained, optimizer, device.type, next_batch, strategy.after_step))
    ledger = StepLedger(spec, events, model, meter, data, lambda: strategy.bytes_sent)
    watch = emulated_clock.Watch(spec, model) if emulated else None
    timing = DdpTiming(strategy.module, spec.warmup_steps, device.type)
    if spec.compile == Compile.ON:
        compile_first_step(events, step, started.sync)

    def between_steps(done: int) -> None:
        ledger.between_steps(done)
        timing.between_steps(done)
    window = run_measured_loop(step, sync=started.sync, barrier=dist.barrier, warmup_steps=spec.warmup_steps,
                               measured_steps=spec.measured_steps, samples_per_step=samples,
                               events=events, loss_value=None if emulated else (lambda t: float(t.item())),
                               between_steps=watch.around(between_steps) if watch else between_steps,
                               device_memory=runtime.device_memory(device.type))
    ledger.after_window(window, strategy.dense_bytes_per_step)
    timing.record(events)
    if watch:
        watch.record(events, window)
    if emulated:  # each host's link, which no rank's step tells apart (frameworks/shared/link_probe.py)
        # gradients 1/s of their size over links s times slower: the probe's bytes too, its time the full size's
        link_probe.probe(events, rank, world, spec.nodes, _exchange_with, dist.barrier,
                         link_probe.NBYTES // int(spec.emulation.get("gradient_scale", 1)))
    if plain_baseline.applies(spec, world) and not emulated:
        plain_baseline.measure(spec, events, device, device.type, next_batch, started.sync)
    strategy.finish()  # model-averaging strategies: the final consensus model on every rank
    if spec.storage != Storage.SYNTHETIC:
        checkpointing.phase(spec, events, rank, world, model)
    ledger.end()
    dist.barrier()
    dist.destroy_process_group()
