"""JAX worker: one process per rank (mpirun), joined by ``jax.distributed``; the data-parallel step is one
``shard_map`` over every process's device (Gloo's collectives on CPU), jitted and compiled before the window,
its compilation time reported apart (the ``compile`` record)."""

from __future__ import annotations

import time

from frameworks.jax import runtime  # first: XLA's flags before JAX starts

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

from frameworks.jax import training  # noqa: E402
from frameworks.jax.models import build_model, init_variables, parameter_count  # noqa: E402
from harness.contract.equivalence import fixed_batch, recipe  # noqa: E402
from harness.contract.events import EventWriter  # noqa: E402
from harness.contract.measure import run_measured_loop  # noqa: E402
from harness.contract.spec import RunSpec  # noqa: E402


def main(spec: RunSpec, events: EventWriter) -> None:
    device = runtime.configure(spec.device)
    rank, world, join_s = runtime.join(spec.world_size)
    mesh = Mesh(np.array(jax.devices()), (training.AXIS,))  # one device per process: data parallel over them
    events.hello(world, device, runtime.versions(), backend="jax-gloo" if world > 1 else "jax",
                 devices=len(jax.devices()), join_s=join_s, gpu_model=None, gpu_count=0)
    # every rank draws the same initial weights from the run's seed (rank 0's, as a broadcast would give)
    model = build_model(spec.workload_options)
    variables = init_variables(model, spec.workload_options, spec.seed)
    tx = training.optimizer_from_recipe(recipe(spec.workload, spec.global_batch, spec.workload_options))
    state = training.replicated((variables["params"], variables["batch_stats"], tx.init(variables["params"])), mesh)
    local = training.to_jax(fixed_batch(spec.workload, spec.workload_options, spec.batch_per_worker,
                                        seed=spec.seed * 1000 + rank))
    images, labels = training.split_batch(local, mesh)
    started = time.perf_counter()
    compiled = training.data_parallel_step(model, tx, mesh).lower(*state, images, labels).compile()
    events.emit("compile", seconds=time.perf_counter() - started)  # outside the window, as the row's compile_s
    holder = [state]

    def step() -> jax.Array:  # the loss, left on the device until the window ends
        *new, loss = compiled(*holder[0], images, labels)
        holder[0] = tuple(new)
        return loss

    barrier = (lambda: multihost_utils.sync_global_devices("rosetta")) if world > 1 else (lambda: None)
    run_measured_loop(step, sync=lambda: jax.block_until_ready(holder[0]), barrier=barrier,
                      warmup_steps=spec.warmup_steps, measured_steps=spec.measured_steps,
                      samples_per_step=spec.batch_per_worker, events=events,
                      loss_value=lambda loss: float(training.local_value(loss)))
    params = holder[0][0]
    dense = training.dense_bytes(params)  # every parameter's gradient is averaged every step: the dense fp32 bytes
    events.emit("comm", bytes_per_step=dense, dense_bytes_per_step=dense)
    events.emit("end", weights_checksum=training.weights_checksum(params), parameters=parameter_count(params))
    barrier()
