"""What the Flax transformers (bert.py, llama.py) share: their variables drawn with NumPy from the shapes Flax
traces (normal(0, 0.02) weights and embeddings, zero biases, unit norm scales, as transformers and the PyTorch
Llama initialize them), and PyTorch's cross-entropy with an ignored label."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

INIT_STD = 0.02


def normal_variables(init: Callable[[], Any], seed: int) -> dict[str, Any]:
    """The variables ``init`` (a Flax ``model.init`` call, traced by ``eval_shape``: nothing compiled) would make,
    drawn with NumPy from ``seed``: every ``kernel`` and ``embedding`` normal(0, INIT_STD), ``bias`` zero, ``scale``
    one (LayerNorm's and RMSNorm's)."""
    rng = np.random.default_rng(seed)

    def draw(path: tuple[Any, ...], leaf: jax.ShapeDtypeStruct) -> np.ndarray:
        last = str(getattr(path[-1], "key", path[-1]))
        if last in ("kernel", "embedding"):
            return (rng.standard_normal(leaf.shape, np.float32) * INIT_STD).astype(np.float32)
        if last.endswith("bias"):
            return np.zeros(leaf.shape, np.float32)
        if last == "scale":
            return np.ones(leaf.shape, np.float32)
        raise ValueError(f"no initializer for variable {jax.tree_util.keystr(path)}")

    return jax.tree_util.tree_map_with_path(draw, dict(jax.eval_shape(init)))


def cross_entropy(logits: jax.Array, labels: jax.Array, ignored: int | None = None) -> jax.Array:
    """Mean softmax cross-entropy (float32 logits) over the labels that are not ``ignored``, as PyTorch's
    ``cross_entropy(ignore_index=...)``."""
    losses = optax.softmax_cross_entropy_with_integer_labels(
        logits.astype(jnp.float32), labels if ignored is None else jnp.where(labels == ignored, 0, labels))
    if ignored is None:
        return losses.mean()
    kept = (labels != ignored).astype(jnp.float32)
    return (losses * kept).sum() / kept.sum()
