"""The Llama-style decoder in Keras (frameworks/shared/keras/llama.py) and its loss: the mean cross-entropy of
every position's prediction of the next token (causal LM)."""

from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf

from frameworks.shared.keras.llama import Llama
from frameworks.shared.keras.workloads.losses import cross_entropy


def build_model(options: Mapping[str, Any]) -> keras.Model:
    return Llama(options)


def model_inputs(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    return batch["input_ids"]


def loss_of(model: keras.Model, batch: Mapping[str, tf.Tensor], training: bool = True) -> tf.Tensor:
    ids = batch["input_ids"]
    return tf.reduce_mean(cross_entropy(ids[:, 1:], model(ids, training=training)[:, :-1]))
