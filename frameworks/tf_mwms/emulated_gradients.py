"""Emulated accelerators with real gradients in TensorFlow MultiWorkerMirroredStrategy (device emulated,
``exchange = "gradients"``: harness/machines/emulated_cluster.py).

The rank builds the real Keras model under the strategy (its variables mirrored, worker 0's initial
values broadcast) and does none of its math. Its step sleeps the profiled forward and backward (dilated:
frameworks/shared/emulated_clock.StepClock), then all-reduces gradients of every trainable variable's
shape the way the real step does: Keras's optimizer calls ``replica_context.all_reduce(SUM, grads)`` on
the whole list in apply_gradients (keras/src/backend/tensorflow/optimizer.py), which the strategy packs
(``bytes_per_pack`` 0, its default: one pack, the gradients flattened and concatenated) into one RING
all-reduce over gRPC. Inside a tf.function that one collective needs every gradient, so it starts after
the whole backward on a GPU too: the emulated step's order (passes, exchange, update) is the real one's,
with nothing to schedule per layer. The update's share is slept after the exchange; no update is run
(the variables keep the broadcast values, alike on every worker).
"""

from __future__ import annotations

from typing import Callable

import keras
import tensorflow as tf

from frameworks.shared.emulated_clock import GRADIENT_VALUE, StepClock, StepFactors
from frameworks.shared.keras import emulated_device, input_pipeline, training
from frameworks.tf_mwms.emulated_device import start
from frameworks.tf_mwms.mirrored import make_barrier
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec


def make_exchange(strategy: tf.distribute.MultiWorkerMirroredStrategy,
                  variables: list[tf.Variable]) -> Callable[[], tf.Tensor]:
    """One step's gradient exchange: every variable's emulated gradient (fp32, GRADIENT_VALUE) all-reduced
    as Keras's optimizer does it; returns the first reduced entry (world x GRADIENT_VALUE when every
    worker's gradient was summed)."""
    gradients = [tf.fill(v.shape, tf.constant(GRADIENT_VALUE, tf.float32)) for v in variables]

    def replica_step() -> tf.Tensor:
        reduced = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        with tf.control_dependencies(reduced):  # every reduced gradient made, none pruned
            return tf.reshape(reduced[0], [-1])[0]

    @tf.function(autograph=False)
    def exchange() -> tf.Tensor:
        return strategy.experimental_local_results(strategy.run(replica_step))[0]

    return exchange


def main(spec: RunSpec, events: EventWriter, rank: int, world: int) -> None:
    """One emulated accelerator's rank with real gradients: real batches through tf.data, the timed passes,
    the strategy's all-reduce of the model's gradients, the update's timed share."""
    strategy = start(spec, events, rank, world)
    with strategy.scope():  # variables mirrored; their initial values are broadcast from worker 0
        keras.utils.set_random_seed(spec.seed)
        model = training.build_model(spec.workload, spec.workload_options)
    variables = model.trainable_variables
    exchange = make_exchange(strategy, variables)
    clock = StepClock(spec.emulation, StepFactors(spec.emulation, spec.seed, rank))
    feed = input_pipeline.Feed(spec, rank, world)  # after the strategy, which must precede TensorFlow's first op
    barrier = make_barrier(strategy, world)

    def step() -> tf.Tensor:
        feed.next()  # the loader's work is real; the batch feeds no math
        clock.passes()
        summed = clock.exchange(exchange)
        clock.update()
        return summed

    def check() -> None:
        summed = float(exchange())
        if abs(summed - world * GRADIENT_VALUE) > 1e-3 * world * GRADIENT_VALUE:
            raise RuntimeError(f"the emulated gradients' all-reduce gave {summed:g}, not {world} x {GRADIENT_VALUE:g}")

    emulated_device.gradients_window(spec, events, step, barrier, feed, clock, model, check)
    barrier()  # no worker leaves while another still needs it in a collective
