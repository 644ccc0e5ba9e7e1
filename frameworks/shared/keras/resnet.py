"""ResNet-50 v1.5 in Keras, layer for layer the PyTorch reference (frameworks/shared/pytorch/models.py).

Channels-last. Padding is explicit (ZeroPadding2D + "valid") because Keras's "same" pads
asymmetrically under stride 2, which would shift every strided output by a pixel relative to
PyTorch's symmetric padding. BatchNorm uses PyTorch's epsilon (1e-5) and momentum (0.1, i.e.
Keras's 0.9). Initialisation follows PyTorch: Kaiming-normal (fan-out) convolutions, the
classifier's PyTorch-default uniform(+-1/sqrt(fan_in)) weight and bias, the last BN of each
block zero-initialised (Goyal et al. 2017).
"""

from __future__ import annotations

import math

import keras
from keras import layers

from frameworks.shared.keras.composite import BuiltByFirstCall

BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9  # Keras's moving-average factor; PyTorch's momentum 0.1


def _conv(filters: int, kernel: int, stride: int = 1, name: str | None = None) -> layers.Conv2D:
    return layers.Conv2D(filters, kernel, strides=stride, padding="valid", use_bias=False, name=name,
                         kernel_initializer=keras.initializers.VarianceScaling(
                             2.0, mode="fan_out", distribution="untruncated_normal"))


def _bn(zero_gamma: bool = False, name: str | None = None) -> layers.BatchNormalization:
    return layers.BatchNormalization(epsilon=BN_EPSILON, momentum=BN_MOMENTUM, name=name,
                                     gamma_initializer="zeros" if zero_gamma else "ones")


class Bottleneck(BuiltByFirstCall, layers.Layer):
    """1x1 -> 3x3 (carries the stride, v1.5) -> 1x1 (4x width), projection shortcut when shapes change."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int, **kwargs):
        super().__init__(**kwargs)
        out_channels = width * self.expansion
        self.conv1, self.bn1 = _conv(width, 1), _bn()
        self.pad2, self.conv2, self.bn2 = layers.ZeroPadding2D(1), _conv(width, 3, stride), _bn()
        self.conv3, self.bn3 = _conv(out_channels, 1), _bn(zero_gamma=True)
        self.projection = None
        if stride != 1 or in_channels != out_channels:
            self.projection = keras.Sequential([_conv(out_channels, 1, stride), _bn()])

    def call(self, x, training=None):
        # the shortcut first, as the PyTorch block does: the probe's layer order is the forward order
        identity = x if self.projection is None else self.projection(x, training=training)
        out = keras.ops.relu(self.bn1(self.conv1(x), training=training))
        out = keras.ops.relu(self.bn2(self.conv2(self.pad2(out)), training=training))
        out = self.bn3(self.conv3(out), training=training)
        return keras.ops.relu(out + identity)


class ResNet50(BuiltByFirstCall, keras.Model):
    """ResNet-50 v1.5: 25,557,032 trainable parameters at 1000 classes, any input size (NHWC); ``blocks``: the
    bottlenecks of each stage, (3, 4, 23, 3) for ResNet-101 (44,549,160)."""

    def __init__(self, num_classes: int = 1000, blocks: tuple[int, ...] = (3, 4, 6, 3), **kwargs):
        super().__init__(**kwargs)
        self.stem_pad, self.stem_conv, self.stem_bn = layers.ZeroPadding2D(3), _conv(64, 7, 2), _bn()
        # zero padding before the max pool equals PyTorch's -inf padding here: its input is post-ReLU (>= 0)
        self.pool_pad, self.stem_pool = layers.ZeroPadding2D(1), layers.MaxPooling2D(3, strides=2)
        self.blocks, in_channels = [], 64
        for (width, stride), count in zip(((64, 1), (128, 2), (256, 2), (512, 2)), blocks):
            for i in range(count):
                self.blocks.append(Bottleneck(in_channels, width, stride if i == 0 else 1))
                in_channels = width * Bottleneck.expansion
        self.pool = layers.GlobalAveragePooling2D()
        bound = 1.0 / math.sqrt(in_channels)
        self.fc = layers.Dense(num_classes, kernel_initializer=keras.initializers.VarianceScaling(
                                   1.0 / 3.0, mode="fan_in", distribution="uniform"),
                               bias_initializer=keras.initializers.RandomUniform(-bound, bound))

    def call(self, images, training=None):
        x = keras.ops.relu(self.stem_bn(self.stem_conv(self.stem_pad(images)), training=training))
        x = self.stem_pool(self.pool_pad(x))
        for block in self.blocks:
            x = block(x, training=training)
        return self.fc(self.pool(x))
