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

from typing import Callable

from frameworks.shared import emulated_rank
from frameworks.shared.keras import input_pipeline
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec


def run(spec: RunSpec, events: EventWriter, rank: int, world: int, barrier: Callable[[], None],
        broadcast: Callable[[str], str]) -> None:
    """A TensorFlow rank after its hello (tf_mwms's and horovod_tf's): real images through tf.data (or the
    synthetic batch), the window, the checkpoint phase and the end record, through the framework's
    ``barrier`` and ``broadcast`` (rank 0's string on every rank)."""
    feed = input_pipeline.Feed(spec, rank, world)
    emulated_rank.run(spec, events, rank, world, feed.next, feed.meter, 0, barrier, broadcast)  # threads: see above
