"""TensorFlow MultiWorkerMirroredStrategy worker: one process (one replica) per rank.

Started by torchrun (as a plain process launcher), mpirun or srun through harness.contract.worker, which
maps every launcher's rank variables to RANK / WORLD_SIZE / LOCAL_RANK. The worker builds its
TF_CONFIG from them (cluster.py), unless a Kubeflow TFJob's operator has set one; it trains with a
custom loop (Keras 3's model.fit does not run under this strategy) and all-reduces gradients with
TensorFlow's collective ops: RING (over gRPC) on CPU, NCCL on GPU. Strategy ps_async is not this
strategy but TensorFlow's parameter-server cluster, with its own roles and loop (parameter_server.py).
"""

from __future__ import annotations

import frameworks.shared.keras  # noqa: F401 - first: how TensorFlow and Keras are imported in a worker (see there)

# isort: split
import os

from frameworks.shared import image_input
from frameworks.shared.keras import input_pipeline, runtime, training
from frameworks.tf_mwms import emulated_device, emulated_gradients, parameter_server
from frameworks.tf_mwms.mirrored import build_training, make_barrier, make_strategy
from harness.contract.axes import Compile, Device, Strategy, exchanges_gradients
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec
from harness.contract.workloads import samples_per_step


def main(spec: RunSpec, events: EventWriter) -> None:
    if spec.strategy == Strategy.PS_ASYNC:  # no MultiWorkerMirroredStrategy: a parameter-server cluster
        return parameter_server.main(spec, events)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    skip = image_input.unsupported(spec, "tf_mwms")
    if skip:  # before the strategy: every rank says so and leaves, none waits for another
        events.emit("skip", reason=skip)
        return
    if spec.device == Device.EMULATED and exchanges_gradients(spec.emulation):
        emulated_gradients.main(spec, events, rank, world)  # the model's gradients, all-reduced after the passes
        return
    if spec.device == Device.EMULATED:  # the real tf.data pipeline, a profiled sleep per step, no model
        emulated_device.main(spec, events, rank, world)
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
                               samples_per_step=samples_per_step(spec.workload, spec.workload_options,
                                                                 spec.batch_per_worker),
                               events=events, loss_value=lambda t: float(t), between_steps=feed.between_steps(),
                               device_memory=runtime.device_memory(device_kind))
    feed.emit_data(events, window)
    dense = runtime.dense_bytes(model.trainable_variables)
    events.emit("comm", bytes_per_step=dense, dense_bytes_per_step=dense)
    events.emit("end", weights_checksum=training.weights_checksum(model),
                parameters=training.parameter_count(model), layout=training.image_layout(model))
    barrier()  # no worker leaves while another still needs it in a collective
