"""Inception V3 in Keras, layer for layer the PyTorch one (frameworks/shared/pytorch/workloads/inception_v3.py,
torchvision's without the auxiliary classifier) and its loss: mean softmax cross-entropy.

Channels-last. Keras's own ``InceptionV3`` differs from torchvision's in two ways the contract would see or the
numbers would: its batch norms have no scale (17,216 parameters fewer) and its pool branches' average pools skip
the padding ("same"); here the batch norms scale (epsilon 1e-3, PyTorch's momentum 0.1, Keras's 0.9) and the
padding is counted (explicit zero padding, then a "valid" pool), as PyTorch's ``avg_pool2d`` does by default.
The padded convolutions are stride 1 with odd kernels, where "same" pads symmetrically, as PyTorch does.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import keras
import tensorflow as tf
from keras import layers

from frameworks.shared.keras.composite import BuiltByFirstCall
from frameworks.shared.keras.workloads import resnet50
from harness.contract.workloads.inception_v3 import BLOCKS, FEATURES

BN_EPSILON = 1e-3  # torchvision's BasicConv2d
BN_MOMENTUM = 0.9  # Keras's moving-average factor; PyTorch's momentum 0.1
WEIGHTS = keras.initializers.RandomNormal(0.0, 0.1)  # torchvision's trunc_normal(std 0.1, a=-2, b=2): 20 deviations


class BasicConv2d(BuiltByFirstCall, layers.Layer):
    """Convolution without bias ("same" where PyTorch pads, which keeps the size: stride 1), batch norm, ReLU."""

    def __init__(self, filters: int, kernel, stride: int = 1, padded: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.conv = layers.Conv2D(filters, kernel, strides=stride, padding="same" if padded else "valid",
                                  use_bias=False, kernel_initializer=WEIGHTS)
        self.bn = layers.BatchNormalization(epsilon=BN_EPSILON, momentum=BN_MOMENTUM)

    def call(self, x, training=None):
        return keras.ops.relu(self.bn(self.conv(x), training=training))


class PoolBranch(BuiltByFirstCall, layers.Layer):
    """A 3x3 average pool of stride 1 over the zero-padded input (the padding counted, as PyTorch's), a 1x1."""

    def __init__(self, filters: int, **kwargs):
        super().__init__(**kwargs)
        self.pad, self.pool = layers.ZeroPadding2D(1), layers.AveragePooling2D(3, strides=1)
        self.conv = BasicConv2d(filters, 1)

    def call(self, x, training=None):
        return self.conv(self.pool(self.pad(x)), training=training)


def _chain(specs: list[tuple]) -> list[BasicConv2d]:
    return [BasicConv2d(filters, kernel, stride, padded) for filters, kernel, stride, padded in specs]


def _run(chain: list[layers.Layer], x, training):
    for layer in chain:
        x = layer(x, training=training)
    return x


class InceptionBlock(BuiltByFirstCall, layers.Layer):
    """One of torchvision's InceptionA to InceptionE (``kind``), its branches concatenated in its order."""

    def __init__(self, kind: str, option: int, **kwargs):
        super().__init__(**kwargs)
        self.kind, self.pool = kind, None
        one, s17, s71 = 1, (1, 7), (7, 1)
        if kind == "A":
            self.branches = [_chain([(64, one, 1, False)]), _chain([(48, one, 1, False), (64, 5, 1, True)]),
                             _chain([(64, one, 1, False), (96, 3, 1, True), (96, 3, 1, True)])]
            self.pool = PoolBranch(option)
        elif kind == "B":
            self.branches = [_chain([(384, 3, 2, False)]),
                             _chain([(64, one, 1, False), (96, 3, 1, True), (96, 3, 2, False)])]
        elif kind == "C":
            c = option
            self.branches = [_chain([(192, one, 1, False)]),
                             _chain([(c, one, 1, False), (c, s17, 1, True), (192, s71, 1, True)]),
                             _chain([(c, one, 1, False), (c, s71, 1, True), (c, s17, 1, True), (c, s71, 1, True),
                                     (192, s17, 1, True)])]
            self.pool = PoolBranch(192)
        elif kind == "D":
            self.branches = [_chain([(192, one, 1, False), (320, 3, 2, False)]),
                             _chain([(192, one, 1, False), (192, s17, 1, True), (192, s71, 1, True),
                                     (192, 3, 2, False)])]
        else:  # E: a 1x1, then two branches whose last 3x3 splits into a 1x3 and a 3x1 half
            self.branches = [_chain([(320, one, 1, False)]), _chain([(384, one, 1, False)]),
                             _chain([(384, (1, 3), 1, True), (384, (3, 1), 1, True)]),
                             _chain([(448, one, 1, False), (384, 3, 1, True)]),
                             _chain([(384, (1, 3), 1, True), (384, (3, 1), 1, True)])]
            self.pool = PoolBranch(192)
        if kind in ("B", "D"):
            self.max_pool = layers.MaxPooling2D(3, strides=2)

    def call(self, x, training=None):
        if self.kind == "E":  # torchvision's order: the 1x1, each 3x3 branch's stem then its two halves
            b1 = _run(self.branches[0], x, training)
            b3 = _run(self.branches[1], x, training)
            b3dbl = _run(self.branches[3], x, training)
            outs = [b1, *(half(b3, training=training) for half in self.branches[2]),
                    *(half(b3dbl, training=training) for half in self.branches[4])]
        else:
            outs = [_run(branch, x, training) for branch in self.branches]
        outs.append(self.pool(x, training=training) if self.pool is not None else self.max_pool(x))
        return keras.ops.concatenate(outs, axis=-1)


class InceptionV3(BuiltByFirstCall, keras.Model):
    """23,834,568 trainable parameters at 1000 classes, any input of at least 75 x 75 (NHWC)."""

    def __init__(self, num_classes: int, **kwargs):
        super().__init__(**kwargs)
        self.stem = _chain([(32, 3, 2, False), (32, 3, 1, False), (64, 3, 1, True)])
        self.pool1 = layers.MaxPooling2D(3, strides=2)
        self.stem2 = _chain([(80, 1, 1, False), (192, 3, 1, False)])
        self.pool2 = layers.MaxPooling2D(3, strides=2)
        self.blocks = [InceptionBlock(kind, option) for kind, _, option in BLOCKS]
        self.gap, self.dropout = layers.GlobalAveragePooling2D(), layers.Dropout(0.5)
        bound = 1.0 / math.sqrt(FEATURES)  # PyTorch's default bias of the classifier
        self.fc = layers.Dense(num_classes, kernel_initializer=WEIGHTS,
                               bias_initializer=keras.initializers.RandomUniform(-bound, bound))

    def call(self, images, training=None):
        x = self.pool1(_run(self.stem, images, training))
        x = self.pool2(_run(self.stem2, x, training))
        x = _run(self.blocks, x, training)
        return self.fc(self.dropout(self.gap(x), training=training))


def build_model(options: Mapping[str, Any]) -> keras.Model:
    return InceptionV3(int(options["num_classes"]))


def model_inputs(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    return resnet50.model_inputs(batch)


def loss_of(model: keras.Model, batch: Mapping[str, tf.Tensor], training: bool = True) -> tf.Tensor:
    return resnet50.loss_of(model, batch, training)  # an image classifier's, ResNet-50's
