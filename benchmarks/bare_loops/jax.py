"""A bare JAX training loop in the style of Flax's ImageNet example (examples/imagenet/train.py): a
``flax.training.train_state.TrainState`` holding the parameters, the BatchNorm statistics and the Optax optimizer,
``train_step(state, batch)`` taking the loss's gradient, averaging it (and the statistics) over the data axis with
``lax.pmean`` and calling ``state.apply_gradients``, jitted with the state donated; the example's ``pmap`` over
devices is a ``shard_map`` over the processes' devices here (one per process, as the worker's). The worker's model,
initial weights, fixed batch, optimizer from the recipe and process settings (XLA's threads, jax.distributed),
built by the same functions the worker calls, under mpirun; see the package's docstring. ``python -m
benchmarks.bare_loops.jax SPEC_FILE``, in the jax family's environment (the launcher's interpreter)."""

from __future__ import annotations

from typing import Any, Callable

from frameworks.jax import runtime  # first: XLA's flags before JAX starts

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax.training import train_state  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from benchmarks import bare_loops  # noqa: E402
from frameworks.jax import training  # noqa: E402
from harness.contract.equivalence import fixed_batch, recipe  # noqa: E402

AXIS = "batch"  # the example's axis name


class TrainState(train_state.TrainState):
    batch_stats: dict  # the model's other collections (BatchNorm's statistics; none for the transformers)


def make_train_step(model: Any, loss_of: Callable, seed: int) -> Callable:
    """The example's train_step: loss and gradients (``loss_of``: the builder's), their mean over the data axis, the
    update."""
    def train_step(state: TrainState, batch: dict) -> tuple[TrainState, jax.Array]:
        rng = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(seed), state.step),
                                 jax.lax.axis_index(AXIS))

        def loss_fn(params):
            return loss_of(model, params, state.batch_stats, batch, rng)

        (loss, new_model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        grads, loss, new_model_state = jax.lax.pmean((grads, loss, new_model_state), axis_name=AXIS)
        return state.apply_gradients(grads=grads, batch_stats=new_model_state), loss
    return train_step


def main() -> None:
    spec, _ = bare_loops.read_spec()
    runtime.configure(spec.device)
    rank, world, _ = runtime.join(spec.world_size)
    module = training.model_module(spec.workload)
    tx = training.optimizer_from_recipe(recipe(spec.workload, spec.global_batch, spec.workload_options))
    model = module.build_model(dict(spec.workload_options))
    variables = module.init_variables(model, spec.workload_options, spec.seed)
    mesh = Mesh(np.array(jax.devices()), (AXIS,))
    split = NamedSharding(mesh, P(AXIS))
    state = training.replicated(TrainState.create(
        apply_fn=model.apply, params=variables["params"], tx=tx,
        batch_stats={k: v for k, v in variables.items() if k != "params"}), mesh)
    local = module.to_jax(fixed_batch(spec.workload, spec.workload_options, spec.batch_per_worker,
                                      seed=spec.seed * 1000 + rank))
    batch = {k: jax.make_array_from_process_local_data(split, v) for k, v in local.items()}
    step_fn = jax.jit(jax.shard_map(make_train_step(model, module.loss_of, spec.seed), mesh=mesh, in_specs=(P(), P(AXIS)),
                                    out_specs=(P(), P())), donate_argnums=0)
    holder = [state]

    def step() -> None:
        holder[0], _ = step_fn(holder[0], batch)

    barrier = runtime.barrier(world)
    start, seconds = bare_loops.measure(spec, step, barrier, lambda: jax.block_until_ready(holder[0]))
    slowest = float(np.max(multihost_utils.process_allgather(np.array([seconds])))) if world > 1 else seconds
    if rank == 0:
        bare_loops.report(spec, start, slowest)
    barrier()


if __name__ == "__main__":
    main()
