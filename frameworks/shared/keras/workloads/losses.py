"""The cross-entropy every Keras workload's loss is made of, as PyTorch's (float32 logits)."""

import tensorflow as tf


def cross_entropy(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """Per-example softmax cross-entropy of integer ``labels``, computed in float32 whatever the logits' type."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=tf.cast(logits, tf.float32))
