"""Where a pipeline stage's time goes: each layer of ResNet-50 (the chain the strategy `pipeline` cuts) timed
forward and backward on one microbatch, in one thread as a pipeline worker runs, beside its forward FLOPs.

Prints every layer's share of the FLOPs and of the measured time, its forward GFLOP/s, and the 2-stage cuts by
layer count, by FLOPs (``balance = "flops"``) and by the measured time (what ``balance = "time"`` measures in the
worker, there with one warm-up pass and the median of 5).

    .venv/bin/python benchmarks/pipeline_layers.py [--image-size 32] [--microbatch 4] [--stages 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from frameworks.shared.pytorch.models import ResNet50
from frameworks.torch_ddp.strategies.pipeline_parallel import layer_flops, layer_names, model_layers
from frameworks.torch_ddp.strategies.stage_split import by_cost, by_count, stage_costs
from harness.contract.axes import Workload


def layer_seconds(layers: list[torch.nn.Module], x: torch.Tensor, reps: int) -> list[tuple[float, float]]:
    """(forward, backward) median seconds of each layer on its own input, training mode."""
    inputs = []
    with torch.no_grad():
        for layer in layers:
            inputs.append(x)
            x = layer(x)
    times = []
    for index, layer in enumerate(layers):
        samples = []
        for _ in range(reps + 2):  # the first two warm the allocator and oneDNN's kernels up
            xi = inputs[index].clone().requires_grad_(index > 0)
            t0 = time.perf_counter()
            y = layer(xi)
            t1 = time.perf_counter()
            y.backward(torch.ones_like(y))
            samples.append((t1 - t0, time.perf_counter() - t1))
        samples = samples[2:]
        times.append((statistics.median(f for f, _ in samples), statistics.median(b for _, b in samples)))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--microbatch", type=int, default=4)
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = ResNet50()
    layers, names = model_layers(Workload.RESNET50, model), layer_names(Workload.RESNET50, model)
    x = torch.randn(args.microbatch, 3, args.image_size, args.image_size)
    flops = layer_flops(layers, x)
    times = layer_seconds(layers, x, args.reps)
    micros = [round((f + b) * 1e6) for f, b in times]
    total_flops, total_us = sum(flops), sum(micros)
    print(f"{'layer':12s} {'FLOPs':>7s} {'time':>7s} {'fwd ms':>8s} {'bwd ms':>8s} {'fwd GFLOP/s':>12s}")
    for name, f, (fwd, bwd), us in zip(names, flops, times, micros):
        print(f"{name:12s} {f / total_flops:7.3f} {us / total_us:7.3f} {fwd * 1e3:8.2f} {bwd * 1e3:8.2f} "
              f"{f / fwd / 1e9:12.1f}")
    print(f"forward and backward of one microbatch: {total_us / 1e6:.3f} s")
    for label, cut in (("layers", by_count(len(layers), args.stages)), ("flops", by_cost(flops, args.stages)),
                       ("measured time", by_cost(micros, args.stages))):
        spans = ", ".join(f"{names[part[0]]}..{names[part[-1]]}" for part in cut)
        flop_shares = [round(c / total_flops, 3) for c in stage_costs(flops, cut)]
        time_shares = [round(c / total_us, 3) for c in stage_costs(micros, cut)]
        print(f"cut by {label}: {spans}; FLOPs {flop_shares}, time {time_shares}")


if __name__ == "__main__":
    main()
