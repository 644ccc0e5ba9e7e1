"""VGG-16 in Keras, layer for layer the PyTorch one (frameworks/shared/pytorch/workloads/vgg16.py; Keras's own
``VGG16`` with torchvision's dropout and initialisation) and its loss: mean softmax cross-entropy.

Channels-last; the 3x3 convolutions pad by one on every side ("same" at stride 1 is symmetric). The flatten
before the classifier runs over NHWC, PyTorch's over NCHW: the same weights in another order, the same model.
"""

from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf
from keras import layers

from frameworks.shared.keras.workloads import resnet50
from harness.contract.workloads.vgg16 import BLOCKS, HIDDEN

_ZEROS = "zeros"


def _dense(units: int) -> layers.Dense:
    return layers.Dense(units, kernel_initializer=keras.initializers.RandomNormal(0.0, 0.01),
                        bias_initializer=_ZEROS)


def build_model(options: Mapping[str, Any]) -> keras.Model:
    """Configuration D, 138,357,544 trainable parameters at 224 x 224 and 1000 classes (NHWC)."""
    model = keras.Sequential(name="vgg16")
    for width, convs in BLOCKS:
        for _ in range(convs):
            model.add(layers.Conv2D(width, 3, padding="same", activation="relu", bias_initializer=_ZEROS,
                                    kernel_initializer=keras.initializers.VarianceScaling(
                                        2.0, mode="fan_out", distribution="untruncated_normal")))
        model.add(layers.MaxPooling2D(2, strides=2))
    model.add(layers.Flatten())
    for _ in range(2):
        model.add(_dense(HIDDEN))
        model.add(layers.ReLU())
        model.add(layers.Dropout(0.5))
    model.add(_dense(int(options["num_classes"])))
    return model


def model_inputs(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    return resnet50.model_inputs(batch)


def loss_of(model: keras.Model, batch: Mapping[str, tf.Tensor], training: bool = True) -> tf.Tensor:
    return resnet50.loss_of(model, batch, training)  # an image classifier's, ResNet-50's
