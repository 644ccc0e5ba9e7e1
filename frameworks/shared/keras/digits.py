"""The time-to-accuracy workload in Keras: the MLP on scikit-learn's handwritten digits (no download).

The same model, data and split rule as frameworks/shared/pytorch/digits.py: 1,797 images of 8x8 pixels scaled
to 0..1, a fixed 20% held out (drawn once with a fixed seed, the same on every rank and run) and only
evaluated on, Linear(64, h) - ReLU - Linear(h, h) - ReLU - Linear(h, 10). Two differences, said here
because they matter when rows are compared across frameworks: the held-out 20% is drawn by numpy's
generator, not torch's, so it is a different 20% of the images; and the layers start from Keras's
initializers (Glorot uniform, zero biases), not PyTorch's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import keras
import numpy as np
import tensorflow as tf

HOLDOUT_FRACTION = 0.2
SPLIT_SEED = 12345  # torch_ddp's constant; the permutation itself is numpy's (see above)
CLASSES, PIXELS = 10, 64


@dataclass(frozen=True)
class DigitsData:
    train_x: np.ndarray  # float32, (n, 64), 0..1
    train_y: np.ndarray  # int32 class labels
    test_x: np.ndarray
    test_y: np.ndarray


def load() -> DigitsData:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(x))
    n_test = round(len(x) * HOLDOUT_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return DigitsData(x[train], y[train], x[test], y[test])


def build_model(options: Mapping[str, int | float]) -> keras.Model:
    """The MLP with its variables created (under a strategy's scope, where the caller opens one)."""
    hidden = int(options["hidden_size"])
    return keras.Sequential([keras.Input((PIXELS,)), keras.layers.Dense(hidden, activation="relu"),
                             keras.layers.Dense(hidden, activation="relu"), keras.layers.Dense(CLASSES)])


def shard(data: DigitsData, index: int, count: int, batch: int, seed: int) -> tf.data.Dataset:
    """Endless minibatches of shard ``index`` of ``count`` of the training images (every count-th image,
    as torch_ddp shards by rank), reshuffled every epoch, the last partial batch dropped. ``index`` may
    be a tensor (a parameter-server worker's index, known only where the dataset is built)."""
    images = tf.data.Dataset.from_tensor_slices({"x": data.train_x, "y": data.train_y}).shard(count, index)
    per_shard = len(data.train_x) // count  # the smallest shard's size: a shuffle buffer that holds any shard
    return (images.shuffle(per_shard + 1, seed=seed, reshuffle_each_iteration=True)
            .repeat().batch(batch, drop_remainder=True))


def loss_of(model: keras.Model, batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """Mean cross-entropy of the batch's logits (PyTorch's cross_entropy)."""
    logits = model(batch["x"], training=True)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(batch["y"], logits))


def evaluate(model: keras.Model, data: DigitsData) -> tuple[float, float]:
    """(accuracy as a fraction, mean cross-entropy) on the held-out images."""
    logits = model(data.test_x, training=False)
    accuracy = float(np.mean(np.argmax(keras.ops.convert_to_numpy(logits), 1) == data.test_y))
    loss = float(tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(data.test_y, logits)))
    return accuracy, loss
