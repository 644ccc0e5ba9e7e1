"""The digits MLP in Keras (frameworks/shared/keras/digits.py, which the parameter-server workers use directly):
its variables are made on build (no fixed batch), its loss the mean softmax cross-entropy."""

from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf

from frameworks.shared.keras import digits
from frameworks.shared.keras.workloads.losses import cross_entropy


def build_model(options: Mapping[str, Any]) -> keras.Model:
    return digits.build_model(options)


def model_inputs(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    return batch["x"]


def loss_of(model: keras.Model, batch: Mapping[str, tf.Tensor], training: bool = True) -> tf.Tensor:
    return tf.reduce_mean(cross_entropy(batch["y"], model(batch["x"], training=training)))
