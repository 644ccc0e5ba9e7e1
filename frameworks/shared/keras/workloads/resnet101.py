"""ResNet-101 v1.5 in Keras (frameworks/shared/keras/resnet.py's ResNet with 3, 4, 23, 3 bottlenecks a stage) and
its loss: mean softmax cross-entropy, ResNet-50's."""

from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf

from frameworks.shared.keras.resnet import ResNet50
from frameworks.shared.keras.workloads import resnet50
from harness.contract.workloads.resnet101 import BLOCKS


def build_model(options: Mapping[str, Any]) -> keras.Model:
    return ResNet50(int(options["num_classes"]), BLOCKS)


def model_inputs(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    return resnet50.model_inputs(batch)


def loss_of(model: keras.Model, batch: Mapping[str, tf.Tensor], training: bool = True) -> tf.Tensor:
    return resnet50.loss_of(model, batch, training)
