"""Horovod PyTorch worker: one process per rank, started by horovodrun (Gloo or MPI controller) or mpirun.

The model, synthetic batch, optimizer and loss are the PyTorch ones of the equivalence contract
(frameworks.torch_ddp.training), so the only difference from PyTorch DDP is the gradient exchange:
Horovod's DistributedOptimizer allreduces each gradient as backward produces it (fp32, or fp16 with
``strategy = "fp16"``) and averages.
"""

from __future__ import annotations

import time

import horovod
import horovod.torch as hvd
import torch

from frameworks.torch_ddp import digits
from frameworks.torch_ddp.models import parameter_count
from frameworks.torch_ddp.training import build_model, loss_of, make_optimizer, synthetic_batch, weights_checksum
from frameworks.torch_ddp.worker import emit_data_record, versions
from harness.axes import Device, Storage, Strategy, Workload
from harness.events import EventWriter
from harness.measure import run_measured_loop
from harness.spec import RunSpec


class CountingCompression:
    """A Horovod compressor that adds the bytes of every tensor it hands to allreduce to ``bytes_sent``."""

    def __init__(self, inner: type[hvd.Compression.none]):
        self.inner, self.bytes_sent = inner, 0

    def compress(self, tensor: torch.Tensor) -> tuple[torch.Tensor, object]:
        compressed, context = self.inner.compress(tensor)
        self.bytes_sent += compressed.numel() * compressed.element_size()
        return compressed, context

    def decompress(self, tensor: torch.Tensor, context: object) -> torch.Tensor:
        return self.inner.decompress(tensor, context)


COMPRESSION = {Strategy.ALLREDUCE: hvd.Compression.none, Strategy.FP16: hvd.Compression.fp16}


def controller() -> str:
    """Which Horovod controller this process runs under (the launcher chose it)."""
    return "mpi" if hvd.mpi_enabled() else "gloo"


def distributed_optimizer(optimizer: torch.optim.Optimizer, model: torch.nn.Module,
                          strategy: Strategy) -> tuple[torch.optim.Optimizer, CountingCompression]:
    """Horovod's DistributedOptimizer around ``optimizer`` (gradients averaged), and its byte counter."""
    compression = CountingCompression(COMPRESSION[strategy])
    wrapped = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                       compression=compression, op=hvd.Average)
    return wrapped, compression


def broadcast_from_root(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Start every rank from rank 0's weights (and optimizer state, where there is any).

    Horovod's broadcast_optimizer_state, given an optimizer with no state yet, first takes an
    optimizer step on zero gradients to create it: with weight decay that step moves the weights and
    seeds SGD's momentum (AdamW's step count), which would make this worker's training differ from
    the recipe every framework follows. A fresh optimizer has nothing to broadcast, so it is called
    only once there is state (a resumed optimizer).
    """
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    if optimizer.state_dict()["state"]:
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)


def main(spec: RunSpec, events: EventWriter) -> None:
    if spec.device == Device.CUDA:
        raise RuntimeError("device cuda requested: Horovod here is built for CPU (Gloo) only")
    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    if world != spec.world_size:  # e.g. ranks started without a launcher Horovod knows: each alone
        raise RuntimeError(f"Horovod sees {world} processes, the run has {spec.world_size}")
    found = {**versions(), "horovod": horovod.__version__}
    events.hello(world, "cpu", found, backend=f"horovod-{controller()}", torch_threads=torch.get_num_threads(),
                 gpu_model=None, gpu_count=0)

    torch.manual_seed(spec.seed)
    model = build_model(spec.workload, dict(spec.workload_options))
    optimizer = make_optimizer(spec, model)
    broadcast_from_root(model, optimizer)
    optimizer, compression = distributed_optimizer(optimizer, model, spec.strategy)
    dense = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)

    pipeline, data_wait = None, []  # real data: the input pipeline, seconds each step waited for its batch
    if spec.workload == Workload.DIGITS:
        data = digits.load(torch.device("cpu"))
        stream = digits.batches(data, rank, world, spec.batch_per_worker, spec.seed)
        next_batch = lambda: next(stream)  # noqa: E731
    elif spec.storage != Storage.SYNTHETIC:  # resnet50 images (files or tar shards), bert token partitions
        from frameworks.torch_ddp.input_pipeline import Pipeline  # PyTorch DDP's loader, this rank's shard

        pipeline = Pipeline(spec, rank, world)
        if spec.storage == Storage.CACHED_WARM:
            pipeline.fill_cache()

        def next_batch() -> dict[str, torch.Tensor]:
            t0 = time.perf_counter()
            batch = pipeline.next_batch()
            data_wait.append(time.perf_counter() - t0)
            return batch
    else:
        batch = synthetic_batch(spec, rank, torch.device("cpu"))
        next_batch = lambda: batch  # noqa: E731

    def step() -> torch.Tensor:
        optimizer.zero_grad()  # Horovod's override takes no set_to_none; torch 2 sets to None by default
        loss = loss_of(spec.workload, model, next_batch())
        loss.backward()
        optimizer.step()  # waits for the allreduces, then updates
        return loss.detach()

    bytes_after = [0]  # cumulative bytes handed to allreduce after each step (index = steps done)
    pipeline_at_window = {}  # the input pipeline's counters when the measured window starts

    def between_steps(done: int) -> None:
        bytes_after.append(compression.bytes_sent)
        if pipeline is not None and done == spec.warmup_steps:
            pipeline_at_window.update(bytes=pipeline.bytes_read, objects=pipeline.objects_read,
                                      cached=pipeline.cached_objects(), waits=len(data_wait))
        if spec.workload == Workload.DIGITS and done % int(spec.workload_options["eval_every"]) == 0:
            accuracy, loss = digits.evaluate(model, data)
            events.emit("eval", step=done, accuracy=accuracy, loss=loss)

    window = run_measured_loop(step, sync=lambda: None, barrier=hvd.barrier, warmup_steps=spec.warmup_steps,
                               measured_steps=spec.measured_steps, samples_per_step=spec.batch_per_worker,
                               events=events, loss_value=lambda t: float(t.item()), between_steps=between_steps)
    if pipeline is not None:
        emit_data_record(events, pipeline, pipeline_at_window, data_wait, window, spec)
    measured_bytes = bytes_after[-1] - bytes_after[spec.warmup_steps]
    events.emit("comm", bytes_per_step=measured_bytes / spec.measured_steps, dense_bytes_per_step=dense)
    facts = {}
    if spec.workload == Workload.DIGITS:
        facts["final_accuracy"] = digits.evaluate(model, data)[0]
    events.emit("end", weights_checksum=weights_checksum(model), parameters=parameter_count(model), **facts)
    hvd.barrier()
    hvd.shutdown()
