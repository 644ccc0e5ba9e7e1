"""Chainer + ChainerMN worker: one MPI process per rank, started by mpirun (or srun) through harness.contract.worker.

ChainerMN's ``naive`` communicator (mpi4py allreduce of each gradient) on CPU, ``pure_nccl``
on GPU; its multi-node optimizer averages the gradients across ranks before the update.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from frameworks.chainer.compat import import_chainer
from frameworks.shared import mpi_job

chainer = import_chainer()

mpi_job.check_started_as_one_job(os.environ)  # before chainermn's import starts MPI

import chainermn  # noqa: E402
import numpy as np  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from frameworks.chainer import emulated_device, emulated_gradients, runtime  # noqa: E402
from frameworks.chainer.models import build_model, loss_of, parameter_count  # noqa: E402
from frameworks.chainer.training import (  # noqa: E402
    optimizer_from_recipe,
    to_chainer,
    weights_checksum,
)
from frameworks.shared import image_input  # noqa: E402
from frameworks.shared.pass_timing import BACKWARD, EXCHANGE, FORWARD, PassTimer  # noqa: E402
from harness.contract.axes import Device, Storage, exchanges_gradients  # noqa: E402
from harness.contract.equivalence import fixed_batch, recipe  # noqa: E402
from harness.contract.events import EventWriter  # noqa: E402
from harness.contract.measure import run_measured_loop  # noqa: E402
from harness.contract.spec import RunSpec  # noqa: E402


def start(spec: RunSpec, events: EventWriter) -> tuple[Any, Any, Callable[[], None]]:
    """The communicator, the device and its sync, this rank's BLAS threads set, and the hello record."""
    device_kind = runtime.resolve_device(spec.device)
    comm = chainermn.create_communicator("pure_nccl" if device_kind == "cuda" else "naive")
    mpi_job.check_world(comm.size, spec.world_size, "MPI")
    # set explicitly (an OPENBLAS_NUM_THREADS in the environment would win over OMP_NUM_THREADS);
    # what is in effect is read back into the hello record
    threadpool_limits(limits=runtime.blas_threads(comm.intra_size), user_api="blas")
    if device_kind == "cuda":
        device = chainer.get_device(f"@cupy:{comm.intra_rank}")
        device.use()
        sync = chainer.backends.cuda.cupy.cuda.Device().synchronize
    else:
        device = chainer.get_device("@numpy")
        sync = lambda: None  # noqa: E731 - NumPy returns when the work is done
    events.hello(comm.size, device_kind, runtime.versions(), backend=f"chainermn-{type(comm).__name__}",
                 blas_threads=max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"),
                                  default=None), **runtime.gpu_facts(device_kind))
    return comm, device, sync


def batches(spec: RunSpec, rank: int, world: int, device: Any) -> tuple[Callable[[], dict], Any, Any]:
    """(next_batch, the input pipeline, its stall meter): the fixed batch (pipeline and meter None), or real
    JPEGs from storage through a Chainer iterator (input_pipeline.py), each wait timed."""
    if spec.storage == Storage.SYNTHETIC:
        batch = to_chainer(fixed_batch(spec.workload, spec.workload_options, spec.batch_per_worker,
                                       seed=spec.seed * 1000 + rank), send=device.send)
        return (lambda: batch), None, None
    # imported by the runs that read real data: the iterator and the storage readers
    from frameworks.chainer.input_pipeline import Pipeline

    pipeline = Pipeline(spec, rank, world)
    if spec.storage.fills_cache:
        pipeline.fill_cache()
    meter = image_input.StallMeter(pipeline)

    def next_batch() -> dict:
        images, labels = meter.next_batch(pipeline.next)
        return {"images": device.send(images), "labels": device.send(labels)}
    return next_batch, pipeline, meter


def main(spec: RunSpec, events: EventWriter) -> None:
    if spec.device == Device.EMULATED and exchanges_gradients(spec.emulation):
        return emulated_gradients.main(spec, events)  # the model's gradients, averaged after the passes
    if spec.device == Device.EMULATED:  # the real iterator, a profiled sleep per step, no model
        return emulated_device.main(spec, events)
    comm, device, sync = start(spec, events)
    np.random.seed(spec.seed)  # Chainer's initializers draw from NumPy's global generator
    model = build_model(spec.workload_options)
    model.to_device(device)
    comm.bcast_data(model)  # rank 0's initial weights on every rank
    optimizer = optimizer_from_recipe(recipe(spec.workload, spec.global_batch, spec.workload_options), model,
                                      wrap=lambda opt: chainermn.create_multi_node_optimizer(opt, comm))
    # ChainerMN's optimizer broadcasts the weights instead of updating on its first update() (and on any
    # update() after the set of parameters changed), which would make the first step a step without
    # training. The weights were broadcast just above: record the parameter set as seen, so that every
    # step averages gradients and updates, as in every other framework.
    optimizer.is_changed(model)
    next_batch, pipeline, meter = batches(spec, comm.rank, comm.size, device)

    timer = PassTimer(spec.warmup_steps, enabled=isinstance(device, chainer.backend.CpuDevice))

    def step() -> np.ndarray:  # the loss, left on the device until the window ends
        model.cleargrads()
        batch = next_batch()
        timer.start()
        loss = loss_of(model, batch["images"], batch["labels"])
        timer.lap(FORWARD)
        loss.backward()
        timer.lap(BACKWARD)
        optimizer.update()  # mean gradient over ranks (comm.multi_node_mean_grad), WeightDecay, MomentumSGD
        timer.lap(EXCHANGE)  # the allreduce, not overlapped with the backward, and the update's few operations
        timer.finish()
        return loss.array

    window = run_measured_loop(step, sync=sync, barrier=comm.mpi_comm.Barrier, warmup_steps=spec.warmup_steps,
                               measured_steps=spec.measured_steps, samples_per_step=spec.batch_per_worker,
                               events=events, loss_value=lambda a: float(a),
                               between_steps=meter.between_steps(spec.warmup_steps) if meter else None)
    timer.record(events)
    if meter is not None:
        events.emit("data", **meter.record(window, spec.measured_steps))
        pipeline.close()
    # every parameter's gradient is allreduced every step: the dense fp32 bytes
    dense = sum(param.size * param.dtype.itemsize for param in model.params())
    events.emit("comm", bytes_per_step=dense, dense_bytes_per_step=dense)
    events.emit("end", weights_checksum=weights_checksum(model), parameters=parameter_count(model))
    comm.mpi_comm.Barrier()
