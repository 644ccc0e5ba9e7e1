"""TensorFlow MultiWorkerMirroredStrategy worker: one process (one replica) per rank.

Started by torchrun (as a plain process launcher), mpirun or srun through harness.contract.worker, which
maps every launcher's rank variables to RANK / WORLD_SIZE / LOCAL_RANK. The worker builds its
TF_CONFIG from them (cluster.py), unless a Kubeflow TFJob's operator has set one; it trains with a
custom loop (Keras 3's model.fit does not run under this strategy) and all-reduces gradients with
TensorFlow's collective ops: RING (over gRPC) on CPU, NCCL on GPU. Strategy ps_async is not this
strategy but TensorFlow's parameter-server cluster, with its own roles and loop (parameter_server.py).
"""

from __future__ import annotations

import frameworks.keras_models  # noqa: F401 - first: how TensorFlow and Keras are imported in a worker (see there)

# isort: split
import os
from pathlib import Path
from typing import Callable

import keras
import tensorflow as tf

from frameworks import image_input
from frameworks.keras_models import input_pipeline, runtime, training
from frameworks.tf_mwms import cluster, emulated, parameter_server
from harness.contract.axes import Compile, Device, Strategy
from harness.contract.equivalence import recipe
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
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


def main(spec: RunSpec, events: EventWriter) -> None:
    if spec.strategy == Strategy.PS_ASYNC:  # no MultiWorkerMirroredStrategy: a parameter-server cluster
        return parameter_server.main(spec, events)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    skip = image_input.unsupported(spec, "tf_mwms")
    if skip:  # before the strategy: every rank says so and leaves, none waits for another
        events.emit("skip", reason=skip)
        return
    if spec.device == Device.EMULATED:  # the real tf.data pipeline, a profiled sleep per step, no model
        emulated.main(spec, events, rank, world, make_strategy, make_barrier)
        return
    threads = runtime.configure_threads()
    device_kind = runtime.resolve_device(spec.device, int(os.environ.get("LOCAL_RANK", 0)))
    unavailable = runtime.precision_unavailable(spec.precision, device_kind)
    if unavailable:  # device "auto" found no GPU (the harness refuses device "cpu" before launching)
        events.emit("skip", reason=unavailable)
        return
    strategy = make_strategy(spec, events.out_dir, rank, world, device_kind)
    if strategy.num_replicas_in_sync != world:
        raise RuntimeError(f"MultiWorkerMirroredStrategy has {strategy.num_replicas_in_sync} replicas, "
                           f"the launcher started {world} ranks")
    numerics = runtime.set_precision(spec.precision)
    events.hello(world, device_kind, runtime.versions(), backend="nccl" if device_kind == "cuda" else "ring",
                 **numerics, **threads, **runtime.gpu_facts(device_kind))

    model, train = build_training(spec, strategy, world)
    # after the strategy: MultiWorkerMirroredStrategy must be created before TensorFlow's first op
    feed = input_pipeline.Feed(spec, rank, world)  # the synthetic batch, or real images through tf.data
    barrier = make_barrier(strategy, world)

    if spec.compile == Compile.ON:
        events.emit("compile", seconds=runtime.compile_first_step(lambda: train(feed.next()),
                                                                  runtime.device_sync(device_kind)))
    window = run_measured_loop(lambda: train(feed.next()), sync=runtime.device_sync(device_kind), barrier=barrier,
                               warmup_steps=spec.warmup_steps, measured_steps=spec.measured_steps,
                               samples_per_step=spec.batch_per_worker, events=events, loss_value=lambda t: float(t),
                               between_steps=feed.between_steps())
    feed.emit_data(events, window)
    dense = runtime.dense_bytes(model.trainable_variables)
    events.emit("comm", bytes_per_step=dense, dense_bytes_per_step=dense)
    events.emit("end", weights_checksum=training.weights_checksum(model),
                parameters=training.parameter_count(model), layout=training.image_layout(model))
    barrier()  # no worker leaves while another still needs it in a collective
