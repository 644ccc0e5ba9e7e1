"""What the JAX worker and probe share: the optimizer from the recipe (Optax) and its facts read back, the fixed
batch in JAX's layout, the data-parallel step (``shard_map`` over the processes' devices), the weights checksum."""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Mapping

import jax
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from frameworks.jax.models import loss_of
from harness.contract.equivalence import Recipe

AXIS = "data"


def _sgd_coupled_l2(learning_rate: float, momentum: float, weight_decay: float) -> optax.GradientTransformation:
    # PyTorch's SGD with weight_decay: the decay added to the gradient (every parameter's, BatchNorm's and the
    # biases' too) before the momentum buffer b <- mu b + g; w <- w - lr b, which is optax.sgd's trace
    return optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate, momentum))


def optimizer_from_recipe(plan: Recipe) -> optax.GradientTransformation:
    """SGD with momentum and coupled L2, its hyperparameters kept in its state (so that the probe reads them back)."""
    if plan.name != "sgd" or plan.weight_decay_mode != "l2_coupled" or plan.nesterov:
        raise ValueError(f"the jax worker implements SGD with coupled L2 and no Nesterov, not {plan}")
    return optax.inject_hyperparams(_sgd_coupled_l2)(learning_rate=plan.lr, momentum=plan.momentum,
                                                     weight_decay=plan.weight_decay)


def optimizer_facts(state: Any) -> dict[str, Any]:
    """What the optimizer's state holds, in the probe's terms."""
    hyper = {k: float(np.asarray(v)) for k, v in state.hyperparams.items()}
    return {"name": "sgd", "lr": hyper["learning_rate"], "momentum": hyper["momentum"], "nesterov": False,
            "weight_decay": hyper["weight_decay"], "weight_decay_mode": "l2_coupled"}


def to_jax(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The fixed batch (NCHW images, int64 labels) as the Flax model takes it: NHWC, int32 labels."""
    return {"images": np.ascontiguousarray(batch["images"].transpose(0, 2, 3, 1)),
            "labels": batch["labels"].astype(np.int32)}


def train_step(model: Any, tx: optax.GradientTransformation, axis: str | None) -> Callable:
    """One step on a device's share of the batch: loss and gradients, averaged over ``axis`` (the data-parallel
    ranks, as DDP's allreduce; BatchNorm's statistics are each rank's own batch's, then averaged as DDP's
    broadcast of buffers keeps them one), then the update."""
    def step(params: Any, batch_stats: Any, opt_state: Any, images: jax.Array, labels: jax.Array) -> tuple:
        (loss, batch_stats), grads = jax.value_and_grad(
            lambda p: loss_of(model, p, batch_stats, {"images": images, "labels": labels}), has_aux=True)(params)
        if axis is not None:
            grads, loss, batch_stats = jax.lax.pmean((grads, loss, batch_stats), axis)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), batch_stats, opt_state, loss
    return step


def data_parallel_step(model: Any, tx: optax.GradientTransformation, mesh: Mesh) -> Callable:
    """The step over every process's device: the state replicated, the batch split along ``AXIS``; jitted, its
    state's buffers donated (updated in place)."""
    sharded = jax.shard_map(train_step(model, tx, AXIS), mesh=mesh,
                            in_specs=(P(), P(), P(), P(AXIS), P(AXIS)), out_specs=(P(), P(), P(), P()))
    return jax.jit(sharded, donate_argnums=(0, 1, 2))


def replicated(tree: Any, mesh: Mesh) -> Any:
    """``tree`` (the same NumPy values on every process) as global arrays held whole by every device."""
    sharding = NamedSharding(mesh, P())
    return jax.tree_util.tree_map(
        lambda x: jax.make_array_from_callback(np.shape(x), sharding, lambda index: np.asarray(x)[index]), tree)


def split_batch(local: Mapping[str, np.ndarray], mesh: Mesh) -> tuple[jax.Array, jax.Array]:
    """This process's batch as its share of the global batch (split along ``AXIS``)."""
    sharding = NamedSharding(mesh, P(AXIS))
    return tuple(jax.make_array_from_process_local_data(sharding, local[k]) for k in ("images", "labels"))


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
