"""Model, data, loss, optimizer and training step shared by the TensorFlow frameworks.

All built from the equivalence contract (harness.contract.equivalence): the recipe's optimizer, the fixed
synthetic batch, PyTorch's losses. The step is one builder both frameworks use; they differ only in
how a rank's gradients become the global gradient (``GradientExchange``).
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Mapping

import keras
import numpy as np
import tensorflow as tf

from harness.contract.axes import Precision, Workload
from harness.contract.equivalence import Recipe, fixed_batch
from harness.contract.workloads import DECLARATIONS

FAMILY = "keras"  # the builders this code imports (harness.contract.workloads.declaration.FAMILIES)


def model_module(workload: Workload) -> ModuleType:
    """The workload's Keras builder module (``build_model``, ``model_inputs``, ``loss_of``), named by its
    declaration (a UserError naming the families it has, if none for Keras)."""
    return importlib.import_module(DECLARATIONS[workload].builder(FAMILY))


def build_model(workload: Workload, options: Mapping[str, Any]) -> keras.Model:
    """The workload's model with its variables created (a call on a one-sample dummy input, where the workload
    has a fixed batch; one without makes its variables as it is built)."""
    model = model_module(workload).build_model(options)
    if DECLARATIONS[workload].batch is not None:
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
    return model_module(workload).model_inputs(batch)


def loss_of(workload: Workload, model: keras.Model, batch: Mapping[str, tf.Tensor], training: bool = True):
    """The workload's loss on ``batch`` (its builder module's: ResNet's mean softmax cross-entropy, BERT's MLM +
    NSP, Llama's causal LM), computed in float32."""
    return model_module(workload).loss_of(model, batch, training)


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
        if isinstance(opt, keras.optimizers.LossScaleOptimizer):  # amp_fp16: the recipe is the inner optimizer's
            opt = opt.inner_optimizer
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


def with_loss_scaling(optimization: Optimization, precision: Precision) -> Optimization:
    """amp_fp16: Keras's dynamic loss scaling around the recipe's optimizer (float16's range is too
    narrow for small gradients). It skips a step whose gradients are not finite and halves the scale;
    bfloat16 has float32's range and needs none."""
    if precision != Precision.AMP_FP16:
        return optimization
    return Optimization(keras.optimizers.LossScaleOptimizer(optimization.optimizer), l2=optimization.l2)


@dataclass(frozen=True)
class GradientExchange:
    """How a rank's gradients become the global mean gradient; the rest of the step is shared.

    ``wrap_tape``: wraps the GradientTape (Horovod's DistributedGradientTape averages in ``gradient``).
    ``reduce``: exchanges the list of local gradients after the tape (Horovod's allreduce when the
    rank's computation is XLA-compiled, which a wrapped tape inside the compiled function cannot be).
    ``share``: factor on this rank's gradient (L2 term included) before the optimizer; 1/replicas
    under tf.distribute, whose Keras optimizer sums the replicas' gradients in ``apply_gradients``.
    """

    wrap_tape: Callable[[tf.GradientTape], Any] = lambda tape: tape
    reduce: Callable[[list], list] = lambda grads: grads
    share: float = 1.0


def build_train_step(workload: Workload, model: keras.Model, optimization: Optimization,
                     exchange: GradientExchange = GradientExchange(),
                     jit_compile: bool = False) -> Callable[[Mapping[str, tf.Tensor]], tf.Tensor]:
    """One training step on a batch: loss, gradients, exchange, coupled L2, update. Returns the local loss.

    Not wrapped in tf.function here: the caller compiles it (alone, or inside strategy.run).

    ``jit_compile`` (compile = on): the rank's own computation (forward and backward pass) is one
    XLA-compiled function (``tf.function(jit_compile=True)``); the gradient exchange and the update stay
    outside it. XLA cannot compile the exchange here: TensorFlow 2.21 refuses collectives under XLA on
    CPU ("Collectives are not yet implemented for CPU devices when compiling with XLA", b/194942685),
    which is what MultiWorkerMirroredStrategy's all-reduce in ``apply_gradients`` becomes, and Horovod's
    allreduce op has no XLA kernel ("No registered 'HorovodAllreduce' OpKernel for XLA_CPU_JIT devices";
    our build leaves out xla_mpi_ops.cc). Both errors were seen with the whole step compiled.
    """
    variables = model.trainable_variables
    # Keras 3 variables as their tf.Variables: DistributedGradientTape needs those as sources
    sources = [v.value for v in variables]
    l2, share, optimizer = optimization.l2, exchange.share, optimization.optimizer
    scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    def local_gradients(batch: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, list[tf.Tensor]]:
        with tf.GradientTape() as tape:
            loss = loss_of(workload, model, batch, training=True)
            target = optimizer.scale_loss(loss) if scaled else loss
        grads = exchange.wrap_tape(tape).gradient(target, sources)
        # embedding gradients arrive as IndexedSlices; dense, as PyTorch DDP all-reduces them
        return loss, [tf.convert_to_tensor(g) for g in grads]

    if jit_compile:
        if exchange.wrap_tape is not GradientExchange.wrap_tape:
            raise ValueError("a wrapped tape exchanges inside the XLA-compiled function; give `reduce` instead")
        local_gradients = tf.function(local_gradients, jit_compile=True)

    def step(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
        loss, grads = local_gradients(batch)
        grads = exchange.reduce(grads)
        if l2:  # PyTorch SGD's weight_decay: grad += l2 * w, before momentum (scaled like the loss, if it is)
            factor = l2 * tf.convert_to_tensor(optimizer.dynamic_scale.value) if scaled else l2
            grads = [g + factor * tf.cast(s, g.dtype) for g, s in zip(grads, sources)]
        if share != 1.0:
            grads = [g * share for g in grads]
        optimizer.apply_gradients(zip(grads, variables))
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


def image_layout(model: keras.Model) -> str | None:
    """The layout the model's convolutions run in, read from its Conv2D layers: "NHWC" (Keras's
    channels_last) or "NCHW"; None for a model without convolutions (BERT)."""
    formats = {layer.data_format for layer in model._flatten_layers() if isinstance(layer, keras.layers.Conv2D)}
    if not formats:
        return None
    if len(formats) > 1:
        raise ValueError(f"convolutions in several layouts: {sorted(formats)}")
    return {"channels_last": "NHWC", "channels_first": "NCHW"}[formats.pop()]
