"""Horovod TensorFlow worker: one process per rank, started by horovodrun (Gloo or MPI controller) or mpirun.

Same model, batch, optimizer and step as tf_mwms (frameworks.shared.keras); the gradient exchange is
Horovod's DistributedGradientTape, which averages every gradient across ranks (fp32, or fp16 with
``strategy = "fp16"``; distributed.py). On a GPU node each rank sees only its local rank's GPU and Horovod
exchanges GPU tensors with NCCL; a Horovod built without NCCL there makes the run a skipped row saying how to
build one. With ``device = "emulated"`` no model is built: the TensorFlow
emulated rank (frameworks/shared/keras/emulated_device.py: tf.data, a profiled sleep per step) with
Horovod's barrier and broadcast; with ``exchange = "gradients"`` the model's variables under timed layers
and DistributedGradientTape's allreduces of their gradients (emulated_gradients.py).
"""

from __future__ import annotations

import frameworks.shared.keras  # noqa: F401 - first: how TensorFlow and Keras are imported in a worker (see there)

# isort: split
import os

import horovod
import horovod.tensorflow as hvd
import numpy as np

from frameworks.horovod_tf import emulated_gradients
from frameworks.horovod_tf.distributed import WIRE_BYTES, barrier, build_facts, build_training, controller
from frameworks.shared import emulated_clock, image_input, mpi_job
from frameworks.shared.keras import emulated_device, input_pipeline, runtime, training
from harness.contract.axes import Compile, Device, exchanges_gradients
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec
from harness.contract.workloads import samples_per_step
from harness.machines import emulation


def main(spec: RunSpec, events: EventWriter) -> None:
    skip = image_input.unsupported(spec, "horovod_tf")
    if skip:
        events.emit("skip", reason=skip)
        return
    threads = runtime.configure_threads()
    emulating = spec.device == Device.EMULATED  # its precision only picks the profile: no numerics to set
    # before TensorFlow's runtime starts: this rank's GPU (its local rank's) or the CPU; an emulated
    # accelerator computes nothing
    device_kind = runtime.resolve_device(Device.CPU if emulating else spec.device, int(os.environ.get("LOCAL_RANK", 0)))
    unavailable = None if emulating else runtime.precision_unavailable(spec.precision, device_kind)
    if unavailable:  # device "auto" found no GPU (the harness refuses device "cpu" before launching)
        events.emit("skip", reason=unavailable)
        return
    if device_kind == "cuda" and not hvd.nccl_built():
        events.emit("skip", reason=mpi_job.NO_NCCL)
        return
    numerics = {} if emulating else runtime.set_precision(spec.precision)
    mpi_job.check_started_as_one_job(os.environ)
    real_gradients = emulating and exchanges_gradients(spec.emulation)
    if real_gradients:
        os.environ.update(emulated_clock.horovod_environment(spec.emulation, os.environ))  # before Horovod starts
    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    mpi_job.check_world(world, spec.world_size, "Horovod")
    found = {**runtime.versions(), "horovod": horovod.__version__, **build_facts()}
    if emulating:
        events.hello(world, "emulated", found, backend=f"horovod-{controller()}", **threads,
                     **emulation.hello_facts(spec))
        if real_gradients:  # the model's gradients, each as its layer's backward ends
            emulated_gradients.main(spec, events, rank, world)
        else:  # the real tf.data pipeline, a profiled sleep and a 1-float allreduce per step, no model
            emulated_device.run(spec, events, rank, world, lambda: barrier(world),
                                lambda token: hvd.broadcast_object(token, root_rank=0))
        hvd.shutdown()
        return
    events.hello(world, device_kind, found,
                 backend=f"horovod-{controller()}", **numerics, **threads, **runtime.gpu_facts(device_kind),
                 strategy_note=mpi_job.hierarchical_not_applied(os.environ, bool(hvd.nccl_built()),
                                                                on_gpu=device_kind == "cuda", nodes=hvd.cross_size()))
    train(spec, events, rank, world, device_kind)
    hvd.shutdown()


def train(spec: RunSpec, events: EventWriter, rank: int, world: int, device_kind: str) -> None:
    """Build the model and its step, run the measured loop, and record the window's comm and the end."""
    model, step = build_training(spec)
    feed = input_pipeline.Feed(spec, rank, world)  # the synthetic batch, or real images through tf.data
    sync = runtime.device_sync(device_kind)
    if spec.compile == Compile.ON:
        events.emit("compile", seconds=runtime.compile_first_step(lambda: step(feed.next()), sync))
    window = run_measured_loop(lambda: step(feed.next()), sync=sync, barrier=lambda: barrier(world),
                               warmup_steps=spec.warmup_steps, measured_steps=spec.measured_steps,
                               samples_per_step=samples_per_step(spec.workload, spec.workload_options,
                                                                 spec.batch_per_worker),
                               events=events, loss_value=lambda t: float(t),
                               between_steps=feed.between_steps(), device_memory=runtime.device_memory(device_kind))
    feed.emit_data(events, window)
    values = int(sum(np.prod(v.shape) for v in model.trainable_variables))
    events.emit("comm", bytes_per_step=values * WIRE_BYTES[spec.strategy],
                dense_bytes_per_step=runtime.dense_bytes(model.trainable_variables))
    events.emit("end", weights_checksum=training.weights_checksum(model), parameters=training.parameter_count(model),
                layout=training.image_layout(model))
    barrier(world)  # no rank leaves while another still needs it in a collective
