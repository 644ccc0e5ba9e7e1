"""A bare Horovod + TensorFlow training loop: the worker's threads, device, precision, model (rank 0's
weights broadcast), optimizer and step with DistributedGradientTape, and the fixed batch, under
horovodrun; see the package's docstring."""

import horovod.tensorflow as hvd  # noqa: E402 - after frameworks.shared.keras, which quiets TensorFlow's start-up
import tensorflow as tf  # noqa: E402

from benchmarks import bare_loops
from frameworks.horovod_tf.distributed import barrier, build_training
from frameworks.shared.keras import runtime, training
from harness.contract.axes import Device


def main() -> None:
    spec, _ = bare_loops.read_spec()
    runtime.configure_threads()
    runtime.resolve_device(Device.CPU, 0)
    runtime.set_precision(spec.precision)
    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    _, step = build_training(spec)
    batch = training.synthetic_batch(spec.workload, spec.workload_options, spec.batch_per_worker, spec.seed, rank)
    start, seconds = bare_loops.measure(spec, lambda: step(batch), lambda: barrier(world))
    slowest = float(hvd.allreduce(tf.constant(seconds), op=hvd.Max))
    if rank == 0:
        bare_loops.report(spec, start, slowest)
    barrier(world)
    hvd.shutdown()


if __name__ == "__main__":
    main()
