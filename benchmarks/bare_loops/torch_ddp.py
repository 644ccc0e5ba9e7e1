"""A bare PyTorch DDP training loop: the worker's model (DDP with its built-in allreduce, as
frameworks/torch_ddp/strategies.py builds it for strategy allreduce), fixed batch, optimizer, precision
(autocast and loss scaling), memory format and compilation, under torchrun; see the package's docstring."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from benchmarks import bare_loops
from frameworks.torch_ddp import numerics
from frameworks.torch_ddp.training import build_model, loss_of, make_optimizer, synthetic_batch


def main() -> None:
    spec, _ = bare_loops.read_spec()
    numerics.set_matmul_precision(spec)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(spec.seed)
    model = DDP(numerics.to_memory_format(spec, build_model(spec.workload, dict(spec.workload_options))))
    optimizer = make_optimizer(spec, model)
    batch = numerics.batch_to_memory_format(spec, synthetic_batch(spec, rank, torch.device("cpu")))
    trained = numerics.maybe_compile(spec, model)
    scaler = numerics.grad_scaler(spec, "cpu")

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with numerics.autocast(spec, "cpu"):
            loss = loss_of(spec.workload, trained, batch)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    start, seconds = bare_loops.measure(spec, step, dist.barrier)
    slowest = torch.tensor([seconds])
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        bare_loops.report(spec, start, slowest.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
