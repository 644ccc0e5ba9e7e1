"""Emulated accelerators in TensorFlow MultiWorkerMirroredStrategy and Horovod TensorFlow (device emulated;
MLPerf Storage's method, with the frameworks' own tf.data pipeline).

Each rank reads, decodes and augments its real batches through the tf.data pipeline the training workers
use (frameworks/keras_models/input_pipeline.py) from the run's storage backend; its step is then the
profiled compute time of an accelerator, slept, and a barrier across the workers through the strategy,
which stands in for the gradient all-reduce (frameworks/emulated_rank.py runs the window, its records and
the checkpoint phase, the same for every framework). No model is built and no GPU is used (hidden from
TensorFlow: the collectives run RING over gRPC on the CPU). :func:`run` is what a rank does after its
hello, shared with horovod_tf, whose barrier is its worker's (a 1-float ``hvd.allreduce``, checked).

The barrier is the worker's own (worker.make_barrier): a tf.function all-reducing one float32 across the
workers (RING over gRPC, 4 bytes each way). Measured on one host of 2 cores under a load of 17: about
2.3 ms per step for 2 workers (gloo's barrier in torch_ddp about 1.7 ms, MPI's in chainer about 1.2 ms,
there); the window counts it as it would count a real all-reduce's latency.

``loader_busy`` is None here: tf.data's map runs as threads inside the rank's process (its private pool of
``loader_workers`` threads), whose CPU cannot be told apart from the rank's own (the collectives' gRPC
threads included); ``host_cpu_busy`` still says whether the machine's CPUs were saturated.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from frameworks import emulated_rank
from frameworks.keras_models import input_pipeline, runtime
from harness.contract.axes import Device
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec


def token_broadcast(strategy: tf.distribute.MultiWorkerMirroredStrategy, rank: int) -> Callable[[str], str]:
    """Rank 0's token (8 hex digits) on every worker: an all-reduce in which only rank 0 adds its value."""

    @tf.function
    def total(value: tf.Tensor) -> tf.Tensor:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(tf.identity, args=(value,)), axis=None)

    def broadcast(token: str) -> str:
        mine = float(int(token, 16)) if rank == 0 else 0.0  # 32 bits: exact in a float64
        return f"{int(total(tf.constant(mine, tf.float64))):08x}"

    return broadcast


def run(spec: RunSpec, events: EventWriter, rank: int, world: int, barrier: Callable[[], None],
        broadcast: Callable[[str], str]) -> None:
    """A TensorFlow rank after its hello (tf_mwms's and horovod_tf's): real images through tf.data (or the
    synthetic batch), the window, the checkpoint phase and the end record, through the framework's
    ``barrier`` and ``broadcast`` (rank 0's string on every rank)."""
    feed = input_pipeline.Feed(spec, rank, world)
    emulated_rank.run(spec, events, rank, world, feed.next, feed.meter, 0, barrier, broadcast)  # threads: see above


def main(spec: RunSpec, events: EventWriter, rank: int, world: int, make_strategy: Callable,
         make_barrier: Callable) -> None:
    """One emulated accelerator's rank: real batches through tf.data, profiled sleeps, a barrier per step."""
    threads = runtime.configure_threads()
    runtime.resolve_device(Device.CPU, 0)  # an emulated accelerator computes nothing: GPUs hidden
    strategy = make_strategy(spec, events.out_dir, rank, world, "cpu")
    if strategy.num_replicas_in_sync != world:
        raise RuntimeError(f"MultiWorkerMirroredStrategy has {strategy.num_replicas_in_sync} replicas, "
                           f"the launcher started {world} ranks")
    events.hello(world, "emulated", runtime.versions(), backend="ring", gpu_model=None, gpu_count=0,
                 accelerator=spec.emulation["accelerator"], **threads)
    # tf.data after the strategy: MultiWorkerMirroredStrategy must be created before TensorFlow's first op
    run(spec, events, rank, world, make_barrier(strategy, world), token_broadcast(strategy, rank))
