"""What the JAX worker and probe share: the workload's Flax builder (frameworks/jax/workloads/), the optimizer from
the recipe (Optax) and its facts read back, the data-parallel step (``shard_map`` over the processes' devices), the
weights checksum."""

from __future__ import annotations

import hashlib
import importlib
from types import ModuleType
from typing import Any, Callable, Mapping

import jax
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from harness.contract.equivalence import Recipe
from harness.contract.workloads import DECLARATIONS

AXIS = "data"
FAMILY = "jax"  # the builders this code imports (harness.contract.workloads.declaration.FAMILIES)


def model_module(workload: Any) -> ModuleType:
    """The workload's Flax builder module (frameworks/jax/workloads/), named by its declaration (a UserError naming
    the families it has, if none for JAX)."""
    return importlib.import_module(DECLARATIONS[workload].builder(FAMILY))


def initial_state(module: ModuleType, options: Mapping[str, Any], seed: int,
                  tx: optax.GradientTransformation) -> tuple[Any, tuple[Any, Any, Any]]:
    """The builder ``module``'s model and its training state from ``seed`` (the same on every rank for one seed),
    NumPy: (parameters, the other collections (BatchNorm's statistics, or none), the optimizer's state)."""
    model = module.build_model(dict(options))
    variables = module.init_variables(model, options, seed)
    params = variables["params"]
    return model, (params, {k: v for k, v in variables.items() if k != "params"}, tx.init(params))


def _sgd_coupled_l2(learning_rate: float, momentum: float, weight_decay: float) -> optax.GradientTransformation:
    # PyTorch's SGD with weight_decay: the decay added to the gradient (every parameter's, BatchNorm's and the
    # biases' too) before the momentum buffer b <- mu b + g; w <- w - lr b, which is optax.sgd's trace
    return optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate, momentum))


def optimizer_from_recipe(plan: Recipe) -> optax.GradientTransformation:
    """SGD with momentum and coupled L2, or AdamW with decoupled decay (PyTorch's AdamW: w <- w - lr (adam + wd w),
    optax.adamw's, on every parameter), its hyperparameters kept in its state (so that the probe reads them back)."""
    if plan.name == "sgd" and plan.weight_decay_mode == "l2_coupled" and not plan.nesterov:
        return optax.inject_hyperparams(_sgd_coupled_l2)(learning_rate=plan.lr, momentum=plan.momentum,
                                                         weight_decay=plan.weight_decay)
    if plan.name == "adamw" and plan.weight_decay_mode == "decoupled":
        return optax.inject_hyperparams(optax.adamw)(learning_rate=plan.lr, b1=plan.betas[0], b2=plan.betas[1],
                                                     eps=plan.eps, weight_decay=plan.weight_decay)
    raise ValueError(f"the jax worker implements SGD with coupled L2 and no Nesterov, and AdamW, not {plan}")


def optimizer_facts(state: Any) -> dict[str, Any]:
    """What the optimizer's state holds, in the probe's terms."""
    hyper = {k: float(np.asarray(v)) for k, v in state.hyperparams.items()}
    if "b1" in hyper:
        return {"name": "adamw", "lr": hyper["learning_rate"], "betas": [hyper["b1"], hyper["b2"]],
                "eps": hyper["eps"], "weight_decay": hyper["weight_decay"], "weight_decay_mode": "decoupled"}
    return {"name": "sgd", "lr": hyper["learning_rate"], "momentum": hyper["momentum"], "nesterov": False,
            "weight_decay": hyper["weight_decay"], "weight_decay_mode": "l2_coupled"}


def train_step(model: Any, loss_of: Callable, tx: optax.GradientTransformation, axis: str | None,
               seed: int = 0) -> Callable:
    """One step on a device's share of the batch: loss and gradients (``loss_of``: the builder's), averaged over
    ``axis`` (the data-parallel ranks, as DDP's allreduce; BatchNorm's statistics are each rank's own batch's,
    then averaged as DDP's broadcast of buffers keeps them one), then the update. The dropout key is ``seed``'s,
    folded with the optimizer's step count and the rank (a mask of its own each step and rank)."""
    def step(params: Any, state: Any, opt_state: Any, batch: Mapping[str, jax.Array]) -> tuple:
        rng = jax.random.fold_in(jax.random.PRNGKey(seed), opt_state.count)
        if axis is not None:
            rng = jax.random.fold_in(rng, jax.lax.axis_index(axis))
        (loss, state), grads = jax.value_and_grad(lambda p: loss_of(model, p, state, batch, rng), has_aux=True)(params)
        if axis is not None:
            grads, loss, state = jax.lax.pmean((grads, loss, state), axis)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), state, opt_state, loss
    return step


def data_parallel_step(model: Any, loss_of: Callable, tx: optax.GradientTransformation, mesh: Mesh,
                       seed: int = 0) -> Callable:
    """The step over every process's device: the state replicated, the batch split along ``AXIS``; jitted, its
    state's buffers donated (updated in place)."""
    sharded = jax.shard_map(train_step(model, loss_of, tx, AXIS, seed), mesh=mesh,
                            in_specs=(P(), P(), P(), P(AXIS)), out_specs=(P(), P(), P(), P()))
    return jax.jit(sharded, donate_argnums=(0, 1, 2))


def replicated(tree: Any, mesh: Mesh) -> Any:
    """``tree`` (the same NumPy values on every process) as global arrays held whole by every device."""
    sharding = NamedSharding(mesh, P())
    return jax.tree_util.tree_map(
        lambda x: jax.make_array_from_callback(np.shape(x), sharding, lambda index: np.asarray(x)[index]), tree)


def split_batch(local: Mapping[str, np.ndarray], sharding: NamedSharding) -> dict[str, jax.Array]:
    """This process's batch as its share of the global batch (split along ``sharding``'s first dimension)."""
    return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local.items()}


def local_value(tree: Any) -> Any:
    """A replicated global tree as this process's NumPy copy."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a.addressable_data(0)) if isinstance(a, jax.Array)
                                  else np.asarray(a), tree)


def weights_checksum(params: Any) -> str:
    """Hash of every parameter's bytes, in path order: equal on all ranks iff their weights are identical."""
    digest = hashlib.blake2b(digest_size=16)
    leaves = jax.tree_util.tree_flatten_with_path(local_value(params))[0]
    for _, leaf in sorted(leaves, key=lambda item: jax.tree_util.keystr(item[0])):
        digest.update(np.ascontiguousarray(leaf).tobytes())
    return digest.hexdigest()


def dense_bytes(params: Any) -> int:
    """The bytes every step's gradient mean moves per rank: every parameter, fp32."""
    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(params)))


def parameter_count(params: Any) -> int:
    return int(sum(leaf.size for leaf in jax.tree_util.tree_leaves(params)))
