"""ResNet-50 v1.5 in Flax (linen), the same network as frameworks/shared/pytorch/models.py: the stride on the 3x3
convolution, a projection shortcut where the shape changes, BatchNorm (PyTorch's momentum 0.1 is Flax's 0.9, eps
1e-5), He-normal (fan-out) convolutions and the last BatchNorm of each block zero-initialized (Goyal et al. 2017);
25,557,032 parameters with 1000 classes. Images are NHWC here (the fixed batch's NCHW, transposed by the caller).

The builder the jax family calls (harness.contract.workloads.declaration.FAMILIES; frameworks/jax/workloads/).
"""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, first stride)
HE_FAN_OUT = nn.initializers.variance_scaling(2.0, "fan_out", "normal")  # kaiming_normal_(fan_out, relu)


def _conv(features: int, kernel: int, stride: int, name: str) -> nn.Conv:
    pad = (kernel - 1) // 2  # PyTorch's padding: 3 for the 7x7 stem, 1 for a 3x3, 0 for a 1x1
    return nn.Conv(features, (kernel, kernel), (stride, stride), padding=((pad, pad), (pad, pad)), use_bias=False,
                   kernel_init=HE_FAN_OUT, name=name)


def _norm(train: bool, name: str, zero: bool = False) -> nn.BatchNorm:
    return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5, name=name,
                        scale_init=nn.initializers.zeros if zero else nn.initializers.ones)


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck (1x1, 3x3 with the stride, 1x1 to 4 x width)."""

    width: int
    stride: int

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        out_channels = 4 * self.width
        identity = x
        if self.stride != 1 or x.shape[-1] != out_channels:
            identity = _norm(train, "down_bn")(_conv(out_channels, 1, self.stride, "down_conv")(x))
        y = nn.relu(_norm(train, "bn1")(_conv(self.width, 1, 1, "conv1")(x)))
        y = nn.relu(_norm(train, "bn2")(_conv(self.width, 3, self.stride, "conv2")(y)))
        y = _norm(train, "bn3", zero=True)(_conv(out_channels, 1, 1, "conv3")(y))
        return nn.relu(y + identity)


class ResNet50(nn.Module):
    num_classes: int = 1000

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        x = nn.relu(_norm(train, "stem_bn")(_conv(64, 7, 2, "stem_conv")(x)))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for stage, (width, blocks, stride) in enumerate(STAGES):
            for block in range(blocks):
                x = Bottleneck(width, stride if block == 0 else 1, name=f"stage{stage}_block{block}")(x, train)
        return nn.Dense(self.num_classes, name="fc")(jnp.mean(x, axis=(1, 2)))


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return ResNet50(int(options["num_classes"]))


def init_variables(model: nn.Module, options: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The model's parameters and BatchNorm statistics from ``seed`` (the same on every rank for one seed), as
    NumPy arrays: the shapes traced (``eval_shape``, nothing compiled), then each drawn as its initializer says.

    Flax's own ``init`` compiles a program of every initializer, which took 56-64 s here (op by op or jitted,
    2 busy cores), longer than the training step's own compilation; drawing the same distributions with
    NumPy takes well under a second.
    """
    size = int(options["image_size"])
    shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((1, size, size, 3)), train=False))
    rng = np.random.default_rng(seed)

    def draw(path: tuple[Any, ...], leaf: jax.ShapeDtypeStruct) -> np.ndarray:
        names = [getattr(p, "key", str(p)) for p in path]
        shape, last = leaf.shape, names[-1]
        if names[0] == "batch_stats":
            return (np.ones if last == "var" else np.zeros)(shape, np.float32)
        if last == "scale":  # BatchNorm's gamma: zero on each block's last (bn3)
            return (np.zeros if names[-2] == "bn3" else np.ones)(shape, np.float32)
        if last == "bias":
            return np.zeros(shape, np.float32)
        if len(shape) == 4:  # a convolution (kh, kw, in, out): He normal over fan-out, PyTorch's kaiming_normal_
            fan_out = shape[0] * shape[1] * shape[3]
            return (rng.standard_normal(shape, np.float32) * np.sqrt(2.0 / fan_out)).astype(np.float32)
        bound = 1.0 / np.sqrt(shape[0])  # the classifier (in, out): PyTorch's nn.Linear default
        return rng.uniform(-bound, bound, shape).astype(np.float32)

    return jax.tree_util.tree_map_with_path(draw, dict(shapes))


def to_jax(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The fixed batch (NCHW images, int64 labels) as the Flax model takes it: NHWC, int32 labels."""
    return {"images": np.ascontiguousarray(batch["images"].transpose(0, 2, 3, 1)),
            "labels": batch["labels"].astype(np.int32)}


def forward(model: nn.Module, variables: Mapping[str, Any], batch: Mapping[str, jax.Array]) -> jax.Array:
    """The logits in inference mode (the running BatchNorm statistics)."""
    return model.apply(dict(variables), batch["images"], train=False)


def loss_of(model: nn.Module, params: Any, state: Mapping[str, Any], batch: Mapping[str, jax.Array],
            rng: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    """Mean softmax cross-entropy on ``batch`` (NHWC images, int labels) in training mode, and the BatchNorm
    statistics it updated (``state``: {"batch_stats": ...}); ``rng`` unused (no dropout)."""
    logits, updated = model.apply({"params": params, **state}, batch["images"], train=True, mutable=["batch_stats"])
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()
    return loss, dict(updated)
