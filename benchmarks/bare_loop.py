"""A bare PyTorch DDP training loop: the baseline the harness's overhead is measured against.

Same model, batch, optimizer and process settings as the torch_ddp worker, none of the
harness's machinery: no event records, no per-step clock reads, no device syncs per step.
Prints one JSON line: samples/s over the measured steps (global samples / slowest rank's time),
that time (s) and when rank 0's measured window began (Unix seconds).
"""

import json
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from frameworks.torch_ddp.training import build_model, loss_of, make_optimizer, synthetic_batch
from harness.spec import read_spec_file


def main(spec_file: str) -> None:
    spec, _ = read_spec_file(spec_file)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(spec.seed)
    model = DDP(build_model(spec.workload, dict(spec.workload_options)))
    optimizer = make_optimizer(spec, model)
    batch = synthetic_batch(spec, rank, torch.device("cpu"))

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_of(spec.workload, model, batch).backward()
        optimizer.step()

    for _ in range(spec.warmup_steps):
        step()
    dist.barrier()
    start_unix = time.time()
    start = time.perf_counter()
    for _ in range(spec.measured_steps):
        step()
    elapsed = torch.tensor([time.perf_counter() - start])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        samples = spec.batch_per_worker * spec.measured_steps * dist.get_world_size()
        print(json.dumps({"throughput": samples / elapsed.item(), "window_s": elapsed.item(),
                          "start_time": start_unix}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
