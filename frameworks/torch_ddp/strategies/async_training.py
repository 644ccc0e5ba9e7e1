"""The training loop of the strategies without gradient collectives: parameter servers (synchronous
and Downpour, ``parameter_server.py``) and Hogwild with its locking variant (``hogwild.py``).

They run on CPU tensors (TensorPipe's CPU path; memory shared between processes of one host), keep
the same measured loop, ledger and records as DDP's worker, and add two records: ``staleness`` (per
update of this rank in the measured window) and, on a rank that serves a shard, ``server`` (the
payload bytes its shard took in and sent out per measured step of that rank).

Device emulated with real gradients (synchronous parameter servers): each worker's model is the emulated
one (frameworks/shared/pytorch/emulated_gradients.py), whose backward hands over the gradients at a GPU's
times; the push and pull are then the servers' own, over the emulated links (TCP only: TensorPipe's
shared-memory transport would pass a host's traffic beside its shaped loopback). The servers' update is real
work on this CPU (a parameter server's update runs on its host's CPU), undilated: small beside a dilated step.

Learning rate: a synchronous server applies one update per step with the mean of all workers'
gradients, so it uses the recipe at the global batch; an asynchronous server and Hogwild apply one
update per worker's batch, so they use the recipe at the batch per worker (Downpour's rule).
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

from frameworks.shared import emulated_clock
from frameworks.shared.pytorch import emulated_gradients
from frameworks.shared.pytorch.batches import batch_source
from frameworks.shared.pytorch.ledger import StepLedger
from frameworks.shared.pytorch.runtime import versions
from frameworks.shared.pytorch.training import build_model, dense_bytes, loss_of, optimizer_from_recipe
from frameworks.torch_ddp.strategies.hogwild import SharedModel, one_host_problem, threads_per_process
from frameworks.torch_ddp.strategies.parameter_server import ParameterServerTraining
from harness.contract.axes import Compile, Device, MemoryFormat, Precision, Strategy
from harness.contract.equivalence import recipe
from harness.contract.events import HOST_VARIABLE, EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec
from harness.contract.workloads import samples_per_step
from harness.machines import emulation

PARAMETER_SERVERS = (Strategy.PS_SYNC, Strategy.PS_ASYNC)
SHARED_MEMORY = (Strategy.HOGWILD, Strategy.HOGWILD_LOCKED)


def run_key(spec: RunSpec, events: EventWriter) -> str:
    """Names this run's shared-memory files: the same on every rank, different for every run."""
    return hashlib.blake2b(f"{events.out_dir.resolve()}|{spec.config_id()}".encode(), digest_size=8).hexdigest()


@dataclass
class Updates:
    """What a strategy does in each step and at the end, and the counters the records are made of."""

    step: Callable[[], torch.Tensor]  # one training step; returns its loss
    staleness: list[int]  # per update of this rank, appended as they happen
    bytes_sent: Callable[[], int]  # payload this worker sent so far
    finish: Callable[[], None]  # leaves the same final model on every rank
    # bytes in and out of the shard served here, for the measured steps of every worker
    server: Callable[[], tuple[int, int] | None] = lambda: None


def parameter_server(spec: RunSpec, model: torch.nn.Module, next_batch: Callable) -> Updates:
    synchronous = spec.strategy == Strategy.PS_SYNC
    options = dict(spec.strategy_options)
    plan = recipe(spec.workload, spec.global_batch if synchronous else spec.batch_per_worker,
                  spec.workload_options)
    emulated = spec.device == Device.EMULATED
    client = ParameterServerTraining(model, lambda params: optimizer_from_recipe(plan, params),
                                     servers=int(options["servers"]), synchronous=synchronous,
                                     max_staleness=int(options.get("max_staleness", -1)),
                                     warmup_steps=spec.warmup_steps, tcp_only=emulated)

    def step() -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        batch = next_batch()
        loss = model() if emulated else loss_of(spec.workload, model, batch)  # emulated: the timed passes
        loss.backward()
        client.exchange()  # push the gradient, load the servers' tensors
        if emulated:
            model.update()  # the profiled step's share after its exchange
        return loss.detach()

    def served() -> tuple[int, int] | None:
        shard = client.served
        return None if shard is None else (shard.bytes_in, shard.bytes_out)
    return Updates(step, client.staleness, lambda: client.bytes_sent, client.finish, served)


def shared_memory(spec: RunSpec, events: EventWriter, model: torch.nn.Module,
                  next_batch: Callable) -> tuple[Updates, SharedModel]:
    rank, world = dist.get_rank(), dist.get_world_size()
    shared = SharedModel(model, run_key(spec, events), rank, world, locked=spec.strategy == Strategy.HOGWILD_LOCKED)
    if rank == 0:
        shared.publish()
    dist.barrier()
    shared.attach()
    optimizer = optimizer_from_recipe(recipe(spec.workload, spec.batch_per_worker, spec.workload_options), model)

    def step() -> torch.Tensor:
        shared.before_step()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(spec.workload, model, next_batch())
        loss.backward()
        with shared.update():
            optimizer.step()
        return loss.detach()

    def finish() -> None:
        dist.barrier()  # no rank writes any more: every rank now reads the same final weights
    return Updates(step, shared.staleness, lambda: 0, finish), shared


def numerics_problem(spec: RunSpec) -> str | None:
    """These loops train in fp32, uncompiled, in the default memory format: anything else is said, not ignored."""
    asked = [f"{name} {value.value}" for name, value, plain in
             (("precision", spec.precision, Precision.FP32), ("compile", spec.compile, Compile.OFF),
              ("memory_format", spec.memory_format, MemoryFormat.CONTIGUOUS)) if value != plain]
    return f"strategy {spec.strategy.value} trains in fp32, uncompiled, contiguous; asked: {', '.join(asked)}" \
        if asked else None


def main(spec: RunSpec, events: EventWriter) -> None:
    if numerics_problem(spec):
        events.emit("skip", reason=numerics_problem(spec))
        return
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", spec.procs_per_node))
    if spec.strategy in SHARED_MEMORY:
        torch.set_num_threads(threads_per_process(local_world))  # mnist_hogwild: cores // processes
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    emulated = spec.device == Device.EMULATED
    device_facts = emulation.hello_facts(spec) if emulated else {"gpu_model": None, "gpu_count": 0}
    events.hello(world, "emulated" if emulated else "cpu", versions(), backend="gloo",
                 torch_threads=torch.get_num_threads(), **device_facts)
    if spec.strategy in SHARED_MEMORY:
        hosts: list[str | None] = [None] * world
        dist.all_gather_object(hosts, os.environ.get(HOST_VARIABLE) or socket.gethostname())
        problem = one_host_problem(hosts)
        if problem:
            events.emit("skip", reason=problem)
            dist.destroy_process_group()
            return
    torch.manual_seed(spec.seed)
    model = (emulated_gradients.build(spec, rank) if emulated
             else build_model(spec.workload, dict(spec.workload_options)))
    next_batch, meter, data = batch_source(spec, rank, world, torch.device("cpu"))
    shared = None
    if spec.strategy in PARAMETER_SERVERS:
        updates = parameter_server(spec, model, next_batch)
    else:
        updates, shared = shared_memory(spec, events, model, next_batch)
    ledger = StepLedger(spec, events, model, meter, data, updates.bytes_sent)
    # the counters when the measured window starts (without warm-up: zero, whatever peers pushed already)
    marks = {"staleness": 0}

    def between_steps(done: int) -> None:
        ledger.between_steps(done)
        if done == spec.warmup_steps:
            marks.update(staleness=len(updates.staleness))
    watch = emulated_clock.Watch(spec, model) if emulated else None
    window = run_measured_loop(updates.step, sync=lambda: None, barrier=dist.barrier,
                               warmup_steps=spec.warmup_steps, measured_steps=spec.measured_steps,
                               samples_per_step=samples_per_step(spec.workload, spec.workload_options,
                                                                 spec.batch_per_worker), events=events,
                               loss_value=None if emulated else (lambda t: float(t.item())),
                               between_steps=watch.around(between_steps) if watch else between_steps)
    if watch:
        watch.record(events, window)
    events.emit("staleness", values=updates.staleness[marks["staleness"]:])
    ledger.after_window(window, dense_bytes(model))
    updates.finish()  # every push is applied: the servers' counters are complete
    served = updates.server()
    if served is not None:
        events.emit("server", bytes_in_per_step=served[0] / spec.measured_steps,
                    bytes_out_per_step=served[1] / spec.measured_steps)
    ledger.end()
    dist.barrier()
    if shared is not None:
        shared.close(remove=rank == 0)
    dist.destroy_process_group()
