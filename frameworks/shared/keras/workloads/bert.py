"""BERT pre-training in Keras (frameworks/shared/keras/bert.py) and its loss, as BertForPreTraining's: MLM
cross-entropy averaged over the predicted tokens (label IGNORED_LABEL skipped) plus the mean NSP cross-entropy."""

from __future__ import annotations

from typing import Any, Mapping

import keras
import tensorflow as tf

from frameworks.shared.keras.bert import BertForPreTraining
from frameworks.shared.keras.workloads.losses import cross_entropy
from harness.contract.equivalence import IGNORED_LABEL


def build_model(options: Mapping[str, Any]) -> keras.Model:
    return BertForPreTraining(options)


def model_inputs(batch: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    return {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}


def loss_of(model: keras.Model, batch: Mapping[str, tf.Tensor], training: bool = True) -> tf.Tensor:
    mlm_logits, nsp_logits = model(model_inputs(batch), training=training)
    labels = batch["labels"]
    predicted = tf.cast(tf.not_equal(labels, IGNORED_LABEL), tf.float32)
    token_losses = cross_entropy(tf.where(labels == IGNORED_LABEL, tf.zeros_like(labels), labels), mlm_logits)
    mlm = tf.reduce_sum(token_losses * predicted) / tf.reduce_sum(predicted)
    return mlm + tf.reduce_mean(cross_entropy(batch["next_sentence_label"], nsp_logits))
