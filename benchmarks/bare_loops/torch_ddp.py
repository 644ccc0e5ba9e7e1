"""A bare PyTorch DDP training loop, on CPUs or one GPU per rank: the worker's model (DDP with its built-in
allreduce, as frameworks/torch_ddp/strategies/wrapping.py builds it for strategy allreduce), fixed batch, optimizer,
precision (autocast and loss scaling), memory format and compilation, under torchrun; see the package's
docstring."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from benchmarks import bare_loops
from frameworks.shared.pytorch import numerics
from frameworks.shared.pytorch.training import (
    build_model,
    loss_of,
    make_optimizer,
    synthetic_batch,
)
from harness.contract.axes import Device


def main() -> None:
    spec, _ = bare_loops.read_spec(devices=(Device.CPU, Device.CUDA))
    numerics.set_matmul_precision(spec)
    kind = spec.device.value  # "cpu" or "cuda": as the worker, gloo on CPUs and NCCL on GPUs
    local_rank = int(os.environ["LOCAL_RANK"])
    if kind == "cuda":
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if kind == "cuda" else "gloo")
    rank = dist.get_rank()
    device = torch.device(kind, local_rank) if kind == "cuda" else torch.device("cpu")
    torch.manual_seed(spec.seed)
    model = DDP(numerics.to_memory_format(spec, build_model(spec.workload, dict(spec.workload_options)).to(device)),
                device_ids=[local_rank] if kind == "cuda" else None)
    optimizer = make_optimizer(spec, model)
    batch = numerics.batch_to_memory_format(spec, synthetic_batch(spec, rank, device))
    trained = numerics.maybe_compile(spec, model)
    scaler = numerics.grad_scaler(spec, kind)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with numerics.autocast(spec, kind):
            loss = loss_of(spec.workload, trained, batch)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)
    start, seconds = bare_loops.measure(spec, step, dist.barrier, sync)
    slowest = torch.tensor([seconds], device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        bare_loops.report(spec, start, slowest.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
