"""JAX worker: one process per rank (mpirun), joined by ``jax.distributed``. Strategy allreduce: the data-parallel
step, one ``shard_map`` over every process's device (Gloo's collectives on CPU); strategy mesh: a data x model
mesh, the state sharded along the model axis (mesh.py). Either step is jitted and compiled before the window, its
compilation time reported apart (the ``compile`` record)."""

from __future__ import annotations

import time
from typing import Any, Callable

from frameworks.jax import runtime  # first: XLA's flags before JAX starts

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from frameworks.jax import mesh as mesh_strategy, training  # noqa: E402
from harness.contract.axes import Strategy  # noqa: E402
from harness.contract.equivalence import fixed_batch, recipe  # noqa: E402
from harness.contract.events import EventWriter  # noqa: E402
from harness.contract.measure import run_measured_loop  # noqa: E402
from harness.contract.spec import RunSpec  # noqa: E402
from harness.contract.workloads import samples_per_step  # noqa: E402


def compiled_step(spec: RunSpec, rank: int, events: EventWriter) -> tuple[Callable, tuple, dict]:
    """The compiled step of the run's strategy, the placed state and this rank's batch (global arrays)."""
    # every rank draws the same initial weights from the run's seed (rank 0's, as a broadcast would give)
    module = training.model_module(spec.workload)
    tx = training.optimizer_from_recipe(recipe(spec.workload, spec.global_batch, spec.workload_options))
    model, state = training.initial_state(module, spec.workload_options, spec.seed, tx)
    local = module.to_jax(fixed_batch(spec.workload, spec.workload_options, spec.batch_per_worker,
                                      seed=spec.seed * 1000 + rank))
    if spec.strategy == Strategy.MESH:
        mesh = mesh_strategy.device_mesh(int(spec.strategy_options["model"]))
        state, shardings = mesh_strategy.placed(state, mesh)
        step = mesh_strategy.mesh_step(model, module.loss_of, tx, mesh, shardings, spec.seed)
        batch = training.split_batch(local, mesh_strategy.batch_sharding(mesh))
        events.emit("mesh", axes=dict(mesh.shape), state_bytes_per_rank=mesh_strategy.bytes_per_rank(state))
    else:  # allreduce: one device per process, data parallel over them
        mesh = Mesh(np.array(jax.devices()), (training.AXIS,))
        state = training.replicated(state, mesh)
        step = training.data_parallel_step(model, module.loss_of, tx, mesh, spec.seed)
        batch = training.split_batch(local, NamedSharding(mesh, P(training.AXIS)))
    started = time.perf_counter()
    compiled = step.lower(*state, batch).compile()
    events.emit("compile", seconds=time.perf_counter() - started)  # outside the window, as the row's compile_s
    return compiled, state, batch


def main(spec: RunSpec, events: EventWriter) -> None:
    device = runtime.configure(spec.device)
    rank, world, join_s = runtime.join(spec.world_size)
    events.hello(world, device, runtime.versions(), backend="jax-gloo" if world > 1 else "jax",
                 devices=len(jax.devices()), join_s=join_s, gpu_model=None, gpu_count=0)
    compiled, state, batch = compiled_step(spec, rank, events)
    barrier = runtime.barrier(world)
    barrier()  # every rank compiled before the first step's collectives
    holder: list[Any] = [state]

    def step() -> jax.Array:  # the loss, left on the device until the window ends
        *new, loss = compiled(*holder[0], batch)
        holder[0] = tuple(new)
        return loss

    run_measured_loop(step, sync=lambda: jax.block_until_ready(holder[0]), barrier=barrier,
                      warmup_steps=spec.warmup_steps, measured_steps=spec.measured_steps,
                      samples_per_step=samples_per_step(spec.workload, spec.workload_options, spec.batch_per_worker),
                      events=events,
                      loss_value=lambda loss: float(training.local_value(loss)))
    params = multihost_utils.process_allgather(holder[0][0], tiled=True) if spec.strategy == Strategy.MESH \
        else training.local_value(holder[0][0])
    if spec.strategy != Strategy.MESH:  # every parameter's gradient is averaged every step: the dense fp32 bytes
        dense = training.dense_bytes(params)
        events.emit("comm", bytes_per_step=dense, dense_bytes_per_step=dense)
    events.emit("end", weights_checksum=training.weights_checksum(params), parameters=training.parameter_count(params))
    barrier()
