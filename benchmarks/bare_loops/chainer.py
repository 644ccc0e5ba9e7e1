"""A bare Chainer + ChainerMN training loop: the worker's communicator (naive), BLAS threads, model, rank
0's weights broadcast, multi-node optimizer from the recipe and fixed batch, under mpirun; see the
package's docstring."""

from benchmarks import bare_loops
from frameworks.chainer.compat import import_chainer

chainer = import_chainer()

import chainermn  # noqa: E402
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from frameworks.chainer.models import build_model, loss_of  # noqa: E402
from frameworks.chainer.runtime import blas_threads  # noqa: E402
from frameworks.chainer.training import optimizer_from_recipe, to_chainer  # noqa: E402
from harness.contract.equivalence import fixed_batch, recipe  # noqa: E402


def main() -> None:
    spec, _ = bare_loops.read_spec()
    comm = chainermn.create_communicator("naive")
    threadpool_limits(limits=blas_threads(comm.intra_size), user_api="blas")
    device = chainer.get_device("@numpy")
    np.random.seed(spec.seed)
    model = build_model(spec.workload_options)
    model.to_device(device)
    comm.bcast_data(model)
    optimizer = optimizer_from_recipe(recipe(spec.workload, spec.global_batch, spec.workload_options), model,
                                      wrap=lambda opt: chainermn.create_multi_node_optimizer(opt, comm))
    optimizer.is_changed(model)  # as the worker: the weights were just broadcast, every update trains
    batch = to_chainer(fixed_batch(spec.workload, spec.workload_options, spec.batch_per_worker,
                                   seed=spec.seed * 1000 + comm.rank), send=device.send)

    def step() -> None:
        model.cleargrads()
        loss_of(model, batch["images"], batch["labels"]).backward()
        optimizer.update()

    start, seconds = bare_loops.measure(spec, step, comm.mpi_comm.Barrier)
    slowest = comm.mpi_comm.allreduce(seconds, op=MPI.MAX)
    if comm.rank == 0:
        bare_loops.report(spec, start, slowest)
    comm.mpi_comm.Barrier()


if __name__ == "__main__":
    main()
