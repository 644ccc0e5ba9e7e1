"""Strategy mesh: a data x model device mesh (``jax.sharding``, GSPMD; Mesh-TensorFlow's layouts). Every array of
the training state (parameters, BatchNorm statistics, momentum) is split along the ``model`` axis on its last
dimension (a convolution's or the classifier's output channels) where that divides, else held whole; each rank's
batch is its own (the batch split along both axes). XLA inserts the collectives: each layer's weights gathered
where they are used, the gradients reduced and scattered back to their shards, BatchNorm's statistics over the
whole batch (a synchronized BatchNorm, unlike the data-parallel step's per-rank one)."""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from frameworks.jax.training import train_step

AXES = ("data", "model")


def device_mesh(model: int) -> Mesh:
    """world / model rows (data) of ``model`` devices (model), in process order."""
    return Mesh(np.array(jax.devices()).reshape(-1, model), AXES)


def state_sharding(leaf: Any, mesh: Mesh) -> NamedSharding:
    """Split along ``model`` on the last dimension where it divides, else whole on every device of the mesh."""
    shape, model = np.shape(leaf), mesh.shape["model"]
    if len(shape) >= 1 and shape[-1] % model == 0 and model > 1:
        return NamedSharding(mesh, P(*([None] * (len(shape) - 1)), "model"))
    return NamedSharding(mesh, P())


def placed(tree: Any, mesh: Mesh) -> tuple[Any, Any]:
    """``tree`` (the same NumPy values on every process) as global arrays in their shardings, and the shardings."""
    shardings = jax.tree_util.tree_map(lambda x: state_sharding(x, mesh), tree)
    arrays = jax.tree_util.tree_map(
        lambda x, s: jax.make_array_from_callback(np.shape(x), s, lambda index: np.asarray(x)[index]), tree, shardings)
    return arrays, shardings


def batch_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P(AXES))


def mesh_step(model: Any, loss_of: Callable, tx: optax.GradientTransformation, mesh: Mesh, shardings: Any,
              seed: int = 0) -> Callable:
    """The step of the whole mesh, jitted with the state's shardings in and out (its buffers donated); every
    array of the batch split along both axes."""
    return jax.jit(train_step(model, loss_of, tx, None, seed), in_shardings=(*shardings, batch_sharding(mesh)),
                   out_shardings=(*shardings, NamedSharding(mesh, P())), donate_argnums=(0, 1, 2))


def bytes_per_rank(arrays: Any) -> int:
    """The bytes of the state this process holds (its shards)."""
    return int(sum(shard.data.nbytes for leaf in jax.tree_util.tree_leaves(arrays) for shard in leaf.addressable_shards))
