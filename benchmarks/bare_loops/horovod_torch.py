"""A bare Horovod + PyTorch training loop: the worker's model, fixed batch and optimizer, rank 0's weights
broadcast, hvd.DistributedOptimizer averaging the gradients, under horovodrun; see the package's docstring.

The worker hands DistributedOptimizer its compression inside a byte counter (CountingCompression); here it
gets the compression itself, uncounted."""

import horovod.torch as hvd
import torch

from benchmarks import bare_loops
from frameworks.horovod_torch.distributed import COMPRESSION, broadcast_from_root
from frameworks.shared.pytorch.training import (
    build_model,
    loss_of,
    make_optimizer,
    synthetic_batch,
)


def main() -> None:
    spec, _ = bare_loops.read_spec()
    hvd.init()
    torch.manual_seed(spec.seed)
    model = build_model(spec.workload, dict(spec.workload_options))
    optimizer = make_optimizer(spec, model)
    broadcast_from_root(model, optimizer)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=COMPRESSION[spec.strategy], op=hvd.Average)
    batch = synthetic_batch(spec, hvd.rank(), torch.device("cpu"))

    def step() -> None:
        optimizer.zero_grad()
        loss_of(spec.workload, model, batch).backward()
        optimizer.step()

    start, seconds = bare_loops.measure(spec, step, hvd.barrier)
    slowest = hvd.allreduce(torch.tensor([seconds]), op=hvd.Max)
    if hvd.rank() == 0:
        bare_loops.report(spec, start, slowest.item())
    hvd.shutdown()


if __name__ == "__main__":
    main()
