"""Horovod TensorFlow worker: one process per rank, started by horovodrun (Gloo or MPI controller) or mpirun.

Same model, batch, optimizer and step as tf_mwms (frameworks.keras_models); the gradient exchange is
Horovod's DistributedGradientTape, which averages every gradient across ranks (fp32, or fp16 with
``strategy = "fp16"``). Keras 3 variables are not what the tape expects as sources ('Variable' object
has no attribute 'ref'): the shared step hands it their tf.Variables (``v.value``). With
``device = "emulated"`` no model is built: tf_mwms's emulated rank (frameworks/tf_mwms/emulated.py: tf.data,
a profiled sleep per step) with this worker's barrier and Horovod's broadcast.
"""

from __future__ import annotations

import frameworks.keras_models  # noqa: F401 - first: how TensorFlow and Keras are imported in a worker (see there)

# isort: split
import os
from typing import Callable

import horovod
import horovod.tensorflow as hvd
import keras
import numpy as np
import tensorflow as tf

from frameworks import image_input, mpi_job
from frameworks.keras_models import input_pipeline, runtime, training
from frameworks.tf_mwms import emulated
from harness.contract.axes import Compile, Device, Strategy
from harness.contract.equivalence import recipe
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec

COMPRESSION = {Strategy.ALLREDUCE: hvd.Compression.none, Strategy.FP16: hvd.Compression.fp16}
WIRE_BYTES = {Strategy.ALLREDUCE: 4, Strategy.FP16: 2}  # bytes per float32 gradient value handed to allreduce


def controller() -> str:
    """Which Horovod controller this process runs under (the launcher chose it)."""
    return "mpi" if hvd.mpi_enabled() else "gloo"


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


def main(spec: RunSpec, events: EventWriter) -> None:
    if spec.device == Device.CUDA:
        raise RuntimeError("device cuda requested: Horovod here is built for CPU (Gloo) only")
    skip = image_input.unsupported(spec, "horovod_tf")
    if skip:
        events.emit("skip", reason=skip)
        return
    threads = runtime.configure_threads()
    runtime.resolve_device(Device.CPU, 0)  # emulated too: an emulated accelerator computes nothing
    emulating = spec.device == Device.EMULATED  # its precision only picks the profile: no numerics to set
    unavailable = None if emulating else runtime.precision_unavailable(spec.precision, "cpu")
    if unavailable:  # device "auto": this build of Horovod runs on the CPU
        events.emit("skip", reason=f"{unavailable} (horovod_tf runs on the CPU: Horovod is built without NCCL)")
        return
    numerics = {} if emulating else runtime.set_precision(spec.precision)
    mpi_job.check_started_as_one_job(os.environ)
    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    mpi_job.check_world(world, spec.world_size, "Horovod")
    found = {**runtime.versions(), "horovod": horovod.__version__}
    if emulating:  # the real tf.data pipeline, a profiled sleep and a 1-float allreduce per step, no model
        events.hello(world, "emulated", found, backend=f"horovod-{controller()}", **threads, gpu_model=None,
                     gpu_count=0, accelerator=spec.emulation["accelerator"])
        emulated.run(spec, events, rank, world, lambda: barrier(world),
                     lambda token: hvd.broadcast_object(token, root_rank=0))
        hvd.shutdown()
        return
    events.hello(world, "cpu", found,
                 backend=f"horovod-{controller()}", **numerics, **threads, gpu_model=None, gpu_count=0,
                 strategy_note=mpi_job.hierarchical_not_applied(os.environ, bool(hvd.nccl_built()), on_gpu=False,
                                                                nodes=hvd.cross_size()))

    model, step = build_training(spec)
    feed = input_pipeline.Feed(spec, rank, world)  # the synthetic batch, or real images through tf.data

    if spec.compile == Compile.ON:
        events.emit("compile", seconds=runtime.compile_first_step(lambda: step(feed.next()), lambda: None))
    window = run_measured_loop(lambda: step(feed.next()), sync=lambda: None, barrier=lambda: barrier(world),
                               warmup_steps=spec.warmup_steps, measured_steps=spec.measured_steps,
                               samples_per_step=spec.batch_per_worker, events=events, loss_value=lambda t: float(t),
                               between_steps=feed.between_steps())
    feed.emit_data(events, window)
    values = int(sum(np.prod(v.shape) for v in model.trainable_variables))
    events.emit("comm", bytes_per_step=values * WIRE_BYTES[spec.strategy],
                dense_bytes_per_step=runtime.dense_bytes(model.trainable_variables))
    events.emit("end", weights_checksum=training.weights_checksum(model), parameters=training.parameter_count(model),
                layout=training.image_layout(model))
    barrier(world)  # no rank leaves while another still needs it in a collective
    hvd.shutdown()
