"""Emulated accelerators in the TensorFlow frameworks (device emulated; MLPerf Storage's method, with the
frameworks' own tf.data pipeline): what a rank does after its hello, shared by tf_mwms
(frameworks/tf_mwms/emulated_device.py) and horovod_tf, each with its own barrier and broadcast.

Each rank reads, decodes and augments its real batches through the tf.data pipeline the training workers
use (input_pipeline.py) from the run's storage backend; its step is then the profiled compute time of an
accelerator, slept, and the framework's barrier, which stands in for the gradient all-reduce
(frameworks/shared/emulated_rank.py runs the window, its records and the checkpoint phase, the same for
every framework). No model is built and no GPU is used.

``loader_busy`` is None here: tf.data's map runs as threads inside the rank's process (its private pool of
``loader_workers`` threads), whose CPU cannot be told apart from the rank's own (the collectives' gRPC
threads included); ``host_cpu_busy`` still says whether the machine's CPUs were saturated.
"""

from __future__ import annotations

from typing import Any, Callable

from frameworks.shared import emulated_rank
from frameworks.shared.emulated_clock import Watch
from frameworks.shared.keras import input_pipeline, runtime, training
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec
from harness.contract.workloads import samples_per_step


def run(spec: RunSpec, events: EventWriter, rank: int, world: int, barrier: Callable[[], None],
        broadcast: Callable[[str], str]) -> None:
    """A TensorFlow rank after its hello (tf_mwms's and horovod_tf's): real images through tf.data (or the
    synthetic batch), the window, the checkpoint phase and the end record, through the framework's
    ``barrier`` and ``broadcast`` (rank 0's string on every rank)."""
    feed = input_pipeline.Feed(spec, rank, world)
    emulated_rank.run(spec, events, rank, world, feed.next, feed.meter, 0, barrier, broadcast)  # threads: see above


def gradients_window(spec: RunSpec, events: EventWriter, step: Callable[[], Any], barrier: Callable[[], None],
                     feed: input_pipeline.Feed, clock: Any, model: Any, check: Callable[[], None]) -> None:
    """The window of an emulated rank with real gradients (tf_mwms's and horovod_tf's emulated_gradients.py)
    and its records: ``step`` (a batch, the timed passes, the framework's exchange, the update's sleep),
    then ``check`` (that the exchange summed every rank's gradient) before anything is recorded, then the
    data, emulation, comm and end records (the model's dense fp32 bytes exchanged a step)."""
    watch = Watch(spec, clock)
    window = run_measured_loop(step, sync=lambda: None, barrier=barrier, warmup_steps=spec.warmup_steps,
                               measured_steps=spec.measured_steps,
                               samples_per_step=samples_per_step(spec.workload, spec.workload_options,
                                                                 spec.batch_per_worker),
                               events=events, loss_value=None,  # no loss: no forward math (and no trend to guard)
                               between_steps=watch.around(feed.between_steps() or (lambda done: None)))
    check()
    feed.emit_data(events, window)
    watch.record(events, window)
    dense = runtime.dense_bytes(model.trainable_variables)
    events.emit("comm", bytes_per_step=dense, dense_bytes_per_step=dense)
    events.emit("end", weights_checksum=training.weights_checksum(model),
                parameters=training.parameter_count(model), layout=training.image_layout(model))
