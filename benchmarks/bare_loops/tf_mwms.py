"""A bare TensorFlow MultiWorkerMirroredStrategy training loop: the worker's threads, device, strategy
(TF_CONFIG met through the spec's folder), precision, model, optimizer and distributed step, and the
fixed batch, under torchrun as a plain process launcher; see the package's docstring."""

import os

import tensorflow as tf  # noqa: E402 - after frameworks.shared.keras, which quiets TensorFlow's start-up

from benchmarks import bare_loops
from frameworks.shared.keras import runtime, training
from frameworks.tf_mwms.mirrored import build_training, make_barrier, make_strategy


def slowest(strategy: tf.distribute.MultiWorkerMirroredStrategy, rank: int, world: int, seconds: float) -> float:
    """The longest of the workers' windows: each puts its own at its rank's place, all summed."""

    @tf.function
    def gather(own: tf.Tensor) -> tf.Tensor:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(tf.identity, args=(own,)), axis=None)

    return float(tf.reduce_max(gather(tf.one_hot(rank, world) * seconds)))


def main() -> None:
    spec, out_dir = bare_loops.read_spec()
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    runtime.configure_threads()
    device_kind = runtime.resolve_device(spec.device, int(os.environ.get("LOCAL_RANK", 0)))
    strategy = make_strategy(spec, out_dir, rank, world, device_kind)
    runtime.set_precision(spec.precision)
    _, train = build_training(spec, strategy, world)
    batch = training.synthetic_batch(spec.workload, spec.workload_options, spec.batch_per_worker, spec.seed, rank)
    barrier = make_barrier(strategy, world)
    start, seconds = bare_loops.measure(spec, lambda: train(batch), barrier)
    longest = slowest(strategy, rank, world, seconds)
    if rank == 0:
        bare_loops.report(spec, start, longest)
    barrier()


if __name__ == "__main__":
    main()
