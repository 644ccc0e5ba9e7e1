"""Model, data, loss, optimizer and training step shared by the TensorFlow frameworks.

All built from the equivalence contract (harness.equivalence): the recipe's optimizer, the fixed
synthetic batch, PyTorch's losses. The step is one builder both frameworks use; they differ only in
how a rank's gradients become the global gradient (``GradientExchange``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import keras
import numpy as np
import tensorflow as tf

from frameworks.keras_models.bert import BertForPreTraining
from frameworks.keras_models.resnet import ResNet50
from harness.axes import Workload
from harness.equivalence import IGNORED_LABEL, Recipe, fixed_batch

WORKLOADS = (Workload.RESNET50, Workload.BERT)


def build_model(workload: Workload, options: Mapping[str, Any]) -> keras.Model:
    """The workload's model with its variables created (a call on a one-sample dummy input)."""
    if workload == Workload.RESNET50:
        model = ResNet50(int(options["num_classes"]))
    elif workload == Workload.BERT:
        model = BertForPreTraining(options)
    else:
        raise ValueError(f"no Keras model for workload {workload.value}")
    model(dummy_inputs(workload, options), training=False)
    return model


def dummy_inputs(workload: Workload, options: Mapping[str, Any]) -> Any:
    return model_inputs(workload, to_tensors(workload, fixed_batch(workload, options, 1, seed=0)))


def to_tensors(workload: Workload, batch: Mapping[str, np.ndarray]) -> dict[str, tf.Tensor]:
    """The contract's numpy batch as TensorFlow tensors, once: images NCHW -> NHWC, integers int32."""
    out = {}
    for key, value in batch.items():
        if key == "images":
            value = np.ascontiguousarray(value.transpose(0, 2, 3, 1))
        elif value.dtype == np.int64:
            value = value.astype(np.int32)
        out[key] = tf.constant(value)
    return out


def synthetic_batch(workload: Workload, options: Mapping[str, Any], batch_per_worker: int, seed: int,
                    rank: int) -> dict[str, tf.Tensor]:
    """This rank's fixed batch (the same numbers as every other framework's), made before timing."""
    return to_tensors(workload, fixed_batch(workload, options, batch_per_worker, seed * 1000 + rank))


def model_inputs(workload: Workload, batch: Mapping[str, tf.Tensor]) -> Any:
    if workload == Workload.RESNET50:
        return batch["images"]
    return {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}


def _cross_entropy(labels, logits):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=tf.cast(logits, tf.float32))


def loss_of(workload: Workload, model: keras.Model, batch: Mapping[str, tf.Tensor], training: bool = True):
    """ResNet: mean softmax cross-entropy. BERT: MLM cross-entropy averaged over the predicted tokens
    (label IGNORED_LABEL skipped) plus the mean NSP cross-entropy, as BertForPreTraining's loss."""
    if workload == Workload.RESNET50:
        return tf.reduce_mean(_cross_entropy(batch["labels"], model(batch["images"], training=training)))
    mlm_logits, nsp_logits = model(model_inputs(workload, batch), training=training)
    labels = batch["labels"]
    predicted = tf.cast(tf.not_equal(labels, IGNORED_LABEL), tf.float32)
    token_losses = _cross_entropy(tf.where(labels == IGNORED_LABEL, tf.zeros_like(labels), labels), mlm_logits)
    mlm = tf.reduce_sum(token_losses * predicted) / tf.reduce_sum(predicted)
    return mlm + tf.reduce_mean(_cross_entropy(batch["next_sentence_label"], nsp_logits))


@dataclass
class Optimization:
    """The Keras optimizer plus the coupled L2 term the step adds to gradients.

    Keras 3's SGD ``weight_decay`` is decoupled (it shrinks weights apart from the gradient), not
    PyTorch SGD's L2, so for ``l2_coupled`` the Keras optimizer gets no weight decay and the step
    adds ``l2 * w`` to each gradient before the momentum update, on every trainable variable.
    """

    optimizer: keras.optimizers.Optimizer
    l2: float  # coupled L2 coefficient (0 for decoupled recipes)

    def facts(self) -> dict[str, Any]:
        """What the optimizer objects hold, in the probe's terms (read back, not copied from the recipe)."""
        opt = self.optimizer
        lr = float(keras.ops.convert_to_numpy(opt.learning_rate))
        if isinstance(opt, keras.optimizers.AdamW):
            return {"name": "adamw", "lr": lr, "betas": [float(opt.beta_1), float(opt.beta_2)],
                    "eps": float(opt.epsilon), "weight_decay": float(opt.weight_decay),
                    "weight_decay_mode": "decoupled"}
        if type(opt) is keras.optimizers.SGD:
            decoupled = float(opt.weight_decay or 0.0)
            if decoupled:
                raise ValueError("Keras SGD with its own (decoupled) weight_decay is not the recipe's L2")
            return {"name": "sgd", "lr": lr, "momentum": float(opt.momentum), "nesterov": bool(opt.nesterov),
                    "weight_decay": self.l2, "weight_decay_mode": "l2_coupled"}
        raise TypeError(f"no probe facts for optimizer {type(opt).__name__}")


def optimization_from_recipe(plan: Recipe) -> Optimization:
    if plan.name == "sgd":
        if plan.weight_decay_mode != "l2_coupled":
            raise ValueError(f"SGD recipe with weight decay mode {plan.weight_decay_mode}")
        return Optimization(keras.optimizers.SGD(learning_rate=plan.lr, momentum=plan.momentum,
                                                 nesterov=plan.nesterov), l2=plan.weight_decay)
    if plan.name == "adamw":
        # epsilon set explicitly: Keras's default is 1e-7, the recipe (PyTorch's) 1e-8
        return Optimization(keras.optimizers.AdamW(learning_rate=plan.lr, beta_1=plan.betas[0],
                                                   beta_2=plan.betas[1], epsilon=plan.eps,
                                                   weight_decay=plan.weight_decay), l2=0.0)
    raise ValueError(f"no Keras optimizer for recipe {plan.name}")


@dataclass(frozen=True)
class GradientExchange:
    """How a rank's gradients become the global mean gradient; the rest of the step is shared.

    ``wrap_tape``: wraps the GradientTape (Horovod's DistributedGradientTape averages in ``gradient``).
    ``share``: factor on this rank's gradient (L2 term included) before the optimizer; 1/replicas
    under tf.distribute, whose Keras optimizer sums the replicas' gradients in ``apply_gradients``.
    """

    wrap_tape: Callable[[tf.GradientTape], Any] = lambda tape: tape
    share: float = 1.0


def build_train_step(workload: Workload, model: keras.Model, optimization: Optimization,
                     exchange: GradientExchange = GradientExchange()) -> Callable[[Mapping[str, tf.Tensor]], tf.Tensor]:
    """One training step on a batch: loss, gradients, exchange, coupled L2, update. Returns the local loss.

    Not wrapped in tf.function here: the caller compiles it (alone, or inside strategy.run).
    """
    variables = model.trainable_variables
    # Keras 3 variables as their tf.Variables: DistributedGradientTape needs those as sources
    sources = [v.value for v in variables]
    l2, share = optimization.l2, exchange.share

    def step(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_of(workload, model, batch, training=True)
        grads = exchange.wrap_tape(tape).gradient(loss, sources)
        # embedding gradients arrive as IndexedSlices; dense, as PyTorch DDP all-reduces them
        grads = [tf.convert_to_tensor(g) for g in grads]
        if l2:  # PyTorch SGD's weight_decay: grad += l2 * w, before momentum
            grads = [g + l2 * tf.cast(s, g.dtype) for g, s in zip(grads, sources)]
        if share != 1.0:
            grads = [g * share for g in grads]
        optimization.optimizer.apply_gradients(zip(grads, variables))
        return loss

    return step


def parameter_count(model: keras.Model) -> int:
    return int(sum(np.prod(v.shape) for v in model.trainable_variables))


def weights_checksum(model: keras.Model) -> str:
    """Hash of every trainable variable's bytes: equal on all ranks iff their weights are identical.

    BatchNorm moving statistics (non-trainable) are left out, as in the PyTorch workers: each rank
    updates them from its own batch.
    """
    digest = hashlib.blake2b(digest_size=16)
    for variable in model.trainable_variables:
        digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(variable.value)).tobytes())
    return digest.hexdigest()
