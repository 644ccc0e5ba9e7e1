"""TensorFlow's MultiWorkerMirroredStrategy for a rank: the strategy (the workers meet through the run's
folder, cluster.py), the distributed training step and a barrier across the workers. Used by the worker,
the emulated rank (emulated_device.py) and benchmarks/bare_loops/tf_mwms.py."""

from __future__ import annotations

import frameworks.shared.keras  # noqa: F401 - first: how TensorFlow and Keras are imported in a worker (see there)

# isort: split
import os
from pathlib import Path
from typing import Callable

import keras
import tensorflow as tf

from frameworks.shared.keras import training
from frameworks.tf_mwms import cluster
from harness.contract.axes import Compile
from harness.contract.equivalence import recipe
from harness.contract.spec import RunSpec

RENDEZVOUS_TIMEOUT_S = 300.0  # the run's own timeout still bounds the whole launch


def make_strategy(spec: RunSpec, run_dir: Path, rank: int, world: int,
                  device_kind: str) -> tf.distribute.MultiWorkerMirroredStrategy:
    """The strategy of this rank; the workers meet through ``run_dir`` (cluster.py) unless TF_CONFIG is set."""
    if "TF_CONFIG" not in os.environ:  # a Kubeflow TFJob's operator sets it; every other launcher does not
        cluster.export(cluster.tf_config(run_dir, rank, world, single_host=spec.nodes == 1,
                                         env=os.environ, timeout_s=min(RENDEZVOUS_TIMEOUT_S, spec.timeout_s)))
    implementation = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation.NCCL if device_kind == "cuda" else implementation.RING)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def build_training(spec: RunSpec, strategy: tf.distribute.MultiWorkerMirroredStrategy,
                   world: int) -> tuple[keras.Model, Callable[[dict[str, tf.Tensor]], tf.Tensor]]:
    """The model (variables mirrored) and the distributed training step on a batch, which returns this
    rank's loss; shared with the bare loop benchmarks/bare_loops/tf_mwms.py."""
    with strategy.scope():  # variables mirrored; their initial values are broadcast from worker 0
        keras.utils.set_random_seed(spec.seed)
        model = training.build_model(spec.workload, spec.workload_options)
        optimization = training.with_loss_scaling(training.optimization_from_recipe(
            recipe(spec.workload, spec.global_batch, spec.workload_options)), spec.precision)
        optimization.optimizer.build(model.trainable_variables)  # slots now, not inside the traced step
    # Keras's optimizer sums the replicas' gradients in apply_gradients: each contributes 1/world
    local_step = training.build_train_step(spec.workload, model, optimization,
                                           training.GradientExchange(share=1.0 / world),
                                           jit_compile=spec.compile == Compile.ON)

    # autograph off, as for Horovod-TF's step: the step has no tensor-dependent Python control flow, so the
    # graph is the same (ResNet-50's losses and weight checksum equal to the bit, measured) without the rewrite
    @tf.function(autograph=False)
    def train(batch) -> tf.Tensor:  # one trace: every batch has the same shapes (drop_remainder)
        losses = strategy.run(local_step, args=(batch,))
        # this rank's own loss, as the other frameworks record it: no extra collective per step
        return strategy.experimental_local_results(losses)[0]

    return model, train


def make_barrier(strategy: tf.distribute.MultiWorkerMirroredStrategy, world: int) -> Callable[[], None]:
    """A barrier across the workers: an all-reduce of ones (one float32 per worker), checked."""

    @tf.function
    def all_reduce_one() -> tf.Tensor:
        ones = strategy.run(lambda: tf.constant(1.0))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None)

    def barrier() -> None:
        if int(all_reduce_one()) != world:
            raise RuntimeError("barrier: the all-reduce of ones does not equal the world size")

    return barrier
