"""Emulated accelerators in TensorFlow MultiWorkerMirroredStrategy (device emulated; MLPerf Storage's method,
with the frameworks' own tf.data pipeline).

The rank starts the strategy (no GPU: hidden from TensorFlow, the collectives run RING over gRPC on the
CPU), says hello and hands its barrier and token broadcast to frameworks/shared/keras/emulated_device.py,
which runs tf.data, the window and the checkpoint phase (shared with horovod_tf, whose barrier is a 1-float
``hvd.allreduce``, checked).

The barrier is the strategy's own (mirrored.make_barrier): a tf.function all-reducing one float32 across the
workers (RING over gRPC, 4 bytes each way). Measured on one host of 2 cores under a load of 17: about
2.3 ms per step for 2 workers (gloo's barrier in torch_ddp about 1.7 ms, MPI's in chainer about 1.2 ms,
there); the window counts it as it would count a real all-reduce's latency.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from frameworks.shared.keras import emulated_device, runtime
from frameworks.tf_mwms.mirrored import make_barrier, make_strategy
from harness.contract.axes import Device
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.machines import emulation


def token_broadcast(strategy: tf.distribute.MultiWorkerMirroredStrategy, rank: int) -> Callable[[str], str]:
    """Rank 0's token (8 hex digits) on every worker: an all-reduce in which only rank 0 adds its value."""

    @tf.function
    def total(value: tf.Tensor) -> tf.Tensor:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(tf.identity, args=(value,)), axis=None)

    def broadcast(token: str) -> str:
        mine = float(int(token, 16)) if rank == 0 else 0.0  # 32 bits: exact in a float64
        return f"{int(total(tf.constant(mine, tf.float64))):08x}"

    return broadcast


def main(spec: RunSpec, events: EventWriter, rank: int, world: int) -> None:
    """One emulated accelerator's rank: real batches through tf.data, profiled sleeps, a barrier per step."""
    strategy = start(spec, events, rank, world)
    # tf.data after the strategy: MultiWorkerMirroredStrategy must be created before TensorFlow's first op
    emulated_device.run(spec, events, rank, world, make_barrier(strategy, world), token_broadcast(strategy, rank))


def start(spec: RunSpec, events: EventWriter, rank: int, world: int) -> tf.distribute.MultiWorkerMirroredStrategy:
    """An emulated rank's strategy (on the CPU: the collectives RING over gRPC) after its hello."""
    threads = runtime.configure_threads()
    runtime.resolve_device(Device.CPU, 0)  # an emulated accelerator computes nothing: GPUs hidden
    strategy = make_strategy(spec, events.out_dir, rank, world, "cpu")
    if strategy.num_replicas_in_sync != world:
        raise RuntimeError(f"MultiWorkerMirroredStrategy has {strategy.num_replicas_in_sync} replicas, "
                           f"the launcher started {world} ranks")
    events.hello(world, "emulated", runtime.versions(), backend="ring", **emulation.hello_facts(spec), **threads)
    return strategy
