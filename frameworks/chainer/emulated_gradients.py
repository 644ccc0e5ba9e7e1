"""Emulated accelerators with real gradients in Chainer + ChainerMN (device emulated,
``exchange = "gradients"``: harness/machines/emulated_cluster.py).

The rank builds the real ResNet-50 Chain (its parameters, rank 0's broadcast as the training worker's
are) and does none of its math. Its step sleeps the profiled forward and backward (dilated:
frameworks/shared/emulated_clock.StepClock), filling every parameter's gradient inside that time, then
averages them through the communicator's ``multi_node_mean_grad``, the call ChainerMN's multi-node
optimizer makes in ``update()`` after the whole backward (its double buffering, which would overlap the
exchange with the next step, is not used here nor by the training worker): the emulated step's order is
the real one's. The update's share is slept after the exchange; no update is run.

The communicator is ``naive`` (one MPI allreduce per parameter: 161 for ResNet-50), the training worker's
on the CPU; ChainerMN's GPU communicator (``pure_nccl``) packs them into one buffer first, whose CPU
counterpart (``flat``) needs CuPy. Each rank's gradients are (rank + 1) x GRADIENT_VALUE, so that their
mean, checked after the window, says every rank's arrived.

Import after ``frameworks.chainer.compat.import_chainer()`` (the worker does).
"""

from __future__ import annotations

import numpy as np

from frameworks.chainer.emulated_device import batch_source, start
from frameworks.chainer.models import build_model, parameter_count
from frameworks.chainer.training import weights_checksum
from frameworks.shared.emulated_clock import GRADIENT_VALUE, StepClock, StepFactors, Watch
from frameworks.shared.pass_timing import BACKWARD, EXCHANGE, FORWARD, PassTimer
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec


def main(spec: RunSpec, events: EventWriter) -> None:
    """One emulated accelerator's rank with real gradients: real batches through the iterator, the timed
    passes (the gradients made in them), ChainerMN's mean of the gradients over MPI, the update's timed share."""
    comm = start(spec, events)
    if comm is None:
        return
    rank, world = comm.rank, comm.size
    np.random.seed(spec.seed)  # Chainer's initializers draw from NumPy's global generator
    model = build_model(spec.workload_options)
    comm.bcast_data(model)  # rank 0's initial weights on every rank
    params = list(model.params())
    mine = np.float32((rank + 1) * GRADIENT_VALUE)
    for param in params:
        param.grad = np.empty_like(param.array)

    def make_gradients() -> None:
        for param in params:
            param.grad.fill(mine)

    next_batch, pipeline, meter = batch_source(spec, rank, world)
    clock = StepClock(spec.emulation, StepFactors(spec.emulation, spec.seed, rank))

    timer = PassTimer(spec.warmup_steps)

    def step() -> None:  # no loss: no forward math
        next_batch()  # the loader's work is real; the batch feeds no math
        timer.start()
        timer.lap(FORWARD)  # the profiled passes are one sleep: forward and backward are timed together
        clock.passes(make_gradients)
        timer.lap(BACKWARD)
        clock.exchange(lambda: comm.multi_node_mean_grad(model))
        timer.lap(EXCHANGE)
        clock.update()
        timer.finish()

    watch = Watch(spec, clock)
    window = run_measured_loop(step, sync=lambda: None, barrier=comm.mpi_comm.Barrier, warmup_steps=spec.warmup_steps,
                               measured_steps=spec.measured_steps, samples_per_step=spec.batch_per_worker,
                               events=events, loss_value=None,
                               between_steps=watch.around(meter.between_steps(spec.warmup_steps) if meter
                                                          else lambda done: None))
    mean, expected = float(params[0].grad.flat[0]), (world + 1) / 2 * GRADIENT_VALUE
    if abs(mean - expected) > 1e-3 * expected:
        raise RuntimeError(f"ChainerMN's mean of the emulated gradients is {mean:g}, not {expected:g}")
    if meter is not None:
        events.emit("data", **meter.record(window, spec.measured_steps))
        pipeline.close()
    watch.record(events, window)
    timer.record(events)
    dense = sum(param.size * param.dtype.itemsize for param in params)
    events.emit("comm", bytes_per_step=dense, dense_bytes_per_step=dense)
    events.emit("end", weights_checksum=weights_checksum(model), parameters=parameter_count(model))
    comm.mpi_comm.Barrier()
