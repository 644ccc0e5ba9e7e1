"""Emulated accelerators in Chainer + ChainerMN (device emulated; MLPerf Storage's method, with the
framework's own iterator).

Each rank reads, decodes and augments its real batches through the Chainer iterator the training workers
use (input_pipeline.py: a MultiprocessIterator over ``loader_workers`` processes, a SerialIterator
without) from the run's storage backend; its step is then the profiled compute time of an accelerator,
slept, and a barrier across ranks through ChainerMN's communicator (``comm.mpi_comm.Barrier()``, MPI's
barrier), which stands in for the gradient allreduce (frameworks/shared/emulated_rank.py runs the window, its
records and the checkpoint phase, the same for every framework; the iterator is closed before the
checkpoint phase). On one host of 2 cores under a load of 17 the barrier of 2 ranks
cost about 1.2 ms per step; Open MPI may poll while a rank waits in it (its default progress), keeping a
core busy that the loader processes could use. No model is built, and no GPU is used (the ``naive``
communicator, on the CPU). The iterator's processes are the rank's children: their CPU is
``loader_busy``'s, as the DataLoader's workers are torch_ddp's.

Import after ``frameworks.chainer.compat.import_chainer()`` (the worker does).
"""

from __future__ import annotations

from typing import Any, Callable

import chainermn
import numpy as np

from frameworks.chainer import runtime
from frameworks.shared import emulated_rank, image_input, mpi_job
from harness.contract.axes import Storage
from harness.contract.equivalence import fixed_batch
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.machines import emulation


def main(spec: RunSpec, events: EventWriter) -> None:
    """One emulated accelerator's rank: real batches through the iterator, profiled sleeps, an MPI barrier."""
    comm = start(spec, events)
    if comm is None:
        return
    rank, world = comm.rank, comm.size
    next_batch, pipeline, meter = batch_source(spec, rank, world)
    emulated_rank.run(spec, events, rank, world, next_batch, meter, pipeline.shard.loader_workers if pipeline else 0,
                      comm.mpi_comm.Barrier, lambda token: comm.mpi_comm.bcast(token, root=0),
                      close=pipeline.close if pipeline else None)


def start(spec: RunSpec, events: EventWriter) -> Any:
    """An emulated rank's ChainerMN communicator (``naive``: MPI on the CPU) after its hello; None where the
    run cannot read its data here (a skip record says why; every rank leaves, none waits for another)."""
    comm = chainermn.create_communicator("naive")
    mpi_job.check_world(comm.size, spec.world_size, "MPI")
    skip = image_input.unsupported(spec, "chainer")
    if skip:
        events.emit("skip", reason=skip)
        return None
    events.hello(comm.size, "emulated", runtime.versions(), backend=f"chainermn-{type(comm).__name__}",
                 **emulation.hello_facts(spec))
    return comm


def batch_source(spec: RunSpec, rank: int, world: int) -> tuple[Callable[[], Any], Any, Any]:
    """(next_batch, the input pipeline, its stall meter) of an emulated rank: the fixed batch (pipeline and
    meter None), or real JPEGs from storage through a Chainer iterator, each wait timed."""
    if spec.storage == Storage.SYNTHETIC:
        batch = fixed_batch(spec.workload, spec.workload_options, spec.batch_per_worker, seed=spec.seed * 1000 + rank)
        return (lambda: batch), None, None
    from frameworks.chainer.input_pipeline import Pipeline

    pipeline = Pipeline(spec, rank, world)
    if spec.storage.fills_cache:
        pipeline.fill_cache()
    meter = image_input.StallMeter(pipeline)

    def next_batch() -> tuple[np.ndarray, np.ndarray]:
        return meter.next_batch(pipeline.next)
    return next_batch, pipeline, meter
