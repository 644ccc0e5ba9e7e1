"""Emulated accelerators with real gradients in Horovod TensorFlow (device emulated,
``exchange = "gradients"``: harness/machines/emulated_cluster.py).

The rank builds the real Keras model (rank 0's weights broadcast, as the training worker's are) and does
none of its math. Its step is a tf.function in which every trainable variable passes through a timed
identity (``tf.custom_gradient``): the forward waits for each variable's forward deadline, the backward
for its backward deadline in reverse order, then hands the tape that variable's gradient, filled with a
value that comes out of the sleep (frameworks/shared/emulated_clock.LayerClock; every workload's kernels
take the step's time by their layers' FLOPs, matched to the Keras variables by shape in
harness/contract/model_flops.shares_by_shape; norms and embeddings none, BERT's tied MLM decoder its bias).
The tape is Horovod's DistributedGradientTape, as in the training step: it makes an allreduce of each
gradient, which TensorFlow's executor starts as soon as that gradient exists and Horovod's background
thread fuses and sends while the earlier layers' backward still sleeps: the overlap of a real step. The
update's share is slept after the exchange; no update is run. Horovod's cycle time is dilated with the step.
"""

from __future__ import annotations

from typing import Callable

import horovod.tensorflow as hvd
import keras
import numpy as np
import tensorflow as tf

from frameworks.horovod_tf.distributed import COMPRESSION, barrier
from frameworks.shared.emulated_clock import GRADIENT_VALUE, LayerClock, StepFactors
from frameworks.shared.keras import emulated_device, input_pipeline, training
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.machines import model_flops


def variable_shares(spec: RunSpec, variables: list) -> list[float]:
    """Each trainable variable's share of the step (they sum to 1): a kernel's layer's forward FLOPs
    (harness.machines.model_flops.shares_by_shape), norms' and embeddings' none."""
    return model_flops.shares_by_shape(spec.workload, spec.workload_options, [tuple(v.shape) for v in variables])


def timed_step(variables: list, clock: LayerClock, value: float,
               compression) -> Callable[[], tf.Tensor]:
    """The emulated passes and Horovod's exchange as one tf.function; returns the sum of every averaged
    gradient's first entry (len(variables) x the ranks' mean of ``value`` when every rank's arrived)."""
    sources = [v.value for v in variables]  # Keras 3 variables as their tf.Variables: what the tape expects
    count = len(sources)

    def layer(index: int):
        position = count - 1 - index

        def forward(carry):
            clock.forward(index)
            return carry

        def backward(dy):
            clock.backward(position)
            return dy, tf.constant(value, tf.float32)

        @tf.custom_gradient
        def timed(carry, weight):
            out = tf.py_function(forward, [carry], tf.float32)

            def grad(dy):
                # the gradient's value comes out of the sleep: it exists once its backward has slept, and
                # is no constant that grappler could fold together with Horovod's allreduce of it (a
                # constant gradient's allreduce ran once, at the first step, and then never again)
                done, filled = tf.py_function(backward, [dy], [tf.float32, tf.float32])
                return done, tf.fill(tf.shape(weight), tf.cast(filled, weight.dtype))

            return out, grad

        return timed

    layers = [layer(i) for i in range(count)]

    @tf.function(autograph=False)
    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            carry = tf.zeros(())
            for timed, source in zip(layers, sources):
                carry = timed(carry, tf.convert_to_tensor(source))
        tape = hvd.DistributedGradientTape(tape, compression=compression, sparse_as_dense=True, op=hvd.Average)
        grads = tape.gradient(carry, sources)
        return tf.add_n([tf.reshape(g, [-1])[0] for g in grads])

    return step


def main(spec: RunSpec, events: EventWriter, rank: int, world: int) -> None:
    """One emulated accelerator's rank with real gradients (after its hello)."""
    keras.utils.set_random_seed(spec.seed)
    model = training.build_model(spec.workload, spec.workload_options)
    hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)  # rank 0's weights, as in training
    variables = model.trainable_variables
    clock = LayerClock(variable_shares(spec, variables), spec.emulation,
                       StepFactors(spec.emulation, spec.seed, rank))
    value = (rank + 1) * GRADIENT_VALUE
    passes_and_exchange = timed_step(variables, clock, value, COMPRESSION[spec.strategy])
    feed = input_pipeline.Feed(spec, rank, world)

    last = []  # the last step's sum of averaged gradients, checked after the window

    def step() -> tf.Tensor:
        feed.next()  # the loader's work is real; the batch feeds no math
        clock.start()
        last[:] = [passes_and_exchange()]
        clock.update()
        return last[0]

    def check() -> None:
        summed, expected = float(last[0]), len(variables) * (world + 1) / 2 * GRADIENT_VALUE
        if not np.isclose(summed, expected, rtol=1e-2):
            raise RuntimeError(f"Horovod's average of the emulated gradients sums to {summed:g}, not {expected:g}")

    emulated_device.gradients_window(spec, events, step, lambda: barrier(world), feed, clock, model, check)
    barrier(world)  # no rank leaves while another still needs it in a collective
