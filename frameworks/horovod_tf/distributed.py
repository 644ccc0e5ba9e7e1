"""What Horovod adds to a TensorFlow rank: the training step whose gradients DistributedGradientTape (or,
compiled, hvd.allreduce) averages across ranks (fp32, or fp16 on the wire), rank 0's start broadcast, a
barrier, and which controller the launcher chose. Used by the worker and benchmarks/bare_loops/horovod_tf.py.

Keras 3 variables are not what the tape expects as sources ('Variable' object has no attribute 'ref'):
the shared step hands it their tf.Variables (``v.value``).
"""

from __future__ import annotations

import frameworks.shared.keras  # noqa: F401 - first: how TensorFlow and Keras are imported in a worker (see there)

# isort: split
from typing import Callable

import horovod.tensorflow as hvd
import keras
import tensorflow as tf

from frameworks.shared import mpi_job
from frameworks.shared.keras import training
from harness.contract.axes import Compile, Strategy
from harness.contract.equivalence import recipe
from harness.contract.spec import RunSpec

COMPRESSION = {Strategy.ALLREDUCE: hvd.Compression.none, Strategy.FP16: hvd.Compression.fp16}
WIRE_BYTES = {Strategy.ALLREDUCE: 4, Strategy.FP16: 2}  # bytes per float32 gradient value handed to allreduce


def controller() -> str:
    """Which Horovod controller this process runs under (the launcher chose it)."""
    return "mpi" if hvd.mpi_enabled() else "gloo"


def build_facts() -> dict[str, str]:
    """What this Horovod wheel was built with, for the row's versions (``horovod_build``)."""
    return {"horovod_build": mpi_job.horovod_build(hvd.nccl_built(), hvd.cuda_built(), hvd.mpi_built(),
                                                   hvd.gloo_built())}


def build_training(spec: RunSpec) -> tuple[keras.Model, Callable[[dict[str, tf.Tensor]], tf.Tensor]]:
    """The model (every rank starting from rank 0's weights) and the training step on a batch, gradients
    averaged across ranks, which returns this rank's loss; shared with benchmarks/bare_loops/horovod_tf.py."""
    keras.utils.set_random_seed(spec.seed)
    model = training.build_model(spec.workload, spec.workload_options)
    optimization = training.with_loss_scaling(training.optimization_from_recipe(
        recipe(spec.workload, spec.global_batch, spec.workload_options)), spec.precision)
    optimization.optimizer.build(model.trainable_variables)  # slots now, not inside the traced step
    # every rank starts from rank 0's weights (BatchNorm statistics too); fresh optimizer slots are zeros
    hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)

    def distributed(tape: tf.GradientTape) -> hvd.DistributedGradientTape:
        # sparse_as_dense: embedding gradients all-reduced dense, as PyTorch DDP and tf_mwms do
        return hvd.DistributedGradientTape(tape, compression=COMPRESSION[spec.strategy], sparse_as_dense=True,
                                           op=hvd.Average)

    def allreduce(grads: list[tf.Tensor]) -> list[tf.Tensor]:
        # compile = on: what DistributedGradientTape.gradient does after the tape (no groups given: one
        # average per gradient, fused by Horovod), outside the XLA-compiled forward and backward pass
        return [hvd.allreduce(g, op=hvd.Average, compression=COMPRESSION[spec.strategy]) for g in grads]

    exchange = (training.GradientExchange(reduce=allreduce) if spec.compile == Compile.ON
                else training.GradientExchange(wrap_tape=distributed))
    # autograph off: it would rewrite Horovod's own Python (the tape's allreduce of every gradient, each in
    # a tf.cond) at every trace, 2-5 s of each launch on 2 cores; the step has no tensor-dependent Python
    # control flow, so the graph is the same (losses equal to the bit, measured)
    return model, tf.function(training.build_train_step(spec.workload, model, optimization, exchange,
                                                        jit_compile=spec.compile == Compile.ON),
                              autograph=False)


def barrier(world: int) -> None:
    """A barrier across the ranks: an all-reduce of ones, checked."""
    if int(hvd.allreduce(tf.constant(1.0), op=hvd.Sum)) != world:
        raise RuntimeError("barrier: the all-reduce of ones does not equal the world size")
