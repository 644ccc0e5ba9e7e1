"""ResNet-50 v1.5 in Keras (frameworks/shared/keras/resnet.py) and its loss: mean softmax cross-entropy."""

from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf

from frameworks.shared.keras.resnet import ResNet50
from frameworks.shared.keras.workloads.losses import cross_entropy


def build_model(options: Mapping[str, Any]) -> keras.Model:
    return ResNet50(int(options["num_classes"]))


def model_inputs(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    return batch["images"]


def loss_of(model: keras.Model, batch: Mapping[str, tf.Tensor], training: bool = True) -> tf.Tensor:
    return tf.reduce_mean(cross_entropy(batch["labels"], model(batch["images"], training=training)))
