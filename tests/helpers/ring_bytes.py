"""Run ``python -m tests.helpers.ring_bytes N`` inside a fresh network namespace: N gloo ranks on its loopback,
one reduce-scatter of 16 MB of float32 through emulated_fsdp.ring_reduce_scatter and one through gloo's own;
prints ``ring_ok ring_sent gloo_sent``: whether every rank's chunk is the sum, and the bytes the loopback
carried for each, over the input's (tests/runs/test_emulated_fsdp.py)."""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ELEMENTS = 4_000_000


def _loopback_bytes() -> int:
    with open("/sys/class/net/lo/statistics/tx_bytes") as f:
        return int(f.read())


def _rank(rank: int, n: int, queue) -> None:
    from frameworks.shared.pytorch.emulated_fsdp import ring_reduce_scatter

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29613")
    dist.init_process_group("gloo", rank=rank, world_size=n)
    values = torch.arange(ELEMENTS, dtype=torch.float32) * (rank + 1)
    out = torch.empty(ELEMENTS // n)
    dist.barrier()
    before = _loopback_bytes()
    ring_reduce_scatter(out, values, dist.group.WORLD)
    dist.barrier()
    ring = _loopback_bytes() - before
    ok = torch.allclose(out, torch.arange(ELEMENTS, dtype=torch.float32).view(n, -1)[rank] * sum(range(1, n + 1)))
    flags = torch.tensor([int(ok)])
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    dist.barrier()
    before = _loopback_bytes()
    dist.reduce_scatter_single(out, values)
    dist.barrier()
    own = _loopback_bytes() - before
    if rank == 0:
        queue.put((bool(flags.item()), ring / (4 * ELEMENTS), own / (4 * ELEMENTS)))
    dist.destroy_process_group()


if __name__ == "__main__":
    ranks = int(sys.argv[1])
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_rank, args=(ranks, queue), nprocs=ranks, start_method="spawn")
    print(*queue.get())
