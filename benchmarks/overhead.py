"""Harness overhead: the harness's measured samples/s vs a bare training loop, side by side,
and the fixed cost of a run (start-up: process launch to the first measured step; and
launch wall time less the measured window), harness vs bare loop.

Both are launched the same way (torchrun, same threads per rank, same model, batch and
steps), interleaved round by round so that drift of a shared machine hits both alike.
Prints the medians and their ratios (goal: throughput ratio >= 0.98) and appends them to
benchmarks/RESULTS.md with the machine they ran on.
Usage: python benchmarks/overhead.py [--rounds N] [--size small]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import launchers, provenance
from harness.axes import Device, Size, Storage, Strategy, Workload
from harness.events import read_rank
from harness.launchers import LaunchRequest, worker_argv
from harness.runner import new_sweep_id, run_one
from harness.spec import RunSpec, write_spec_file
from harness.workloads import WORKLOADS

HERE = Path(__file__).resolve().parent


def make_spec(workload: Workload, size: Size, procs: int, batch: int, steps: int) -> RunSpec:
    return RunSpec(scenario="overhead", framework="torch_ddp", workload=workload, size=size,
                   workload_options=WORKLOADS[workload].options(size), nodes=1, procs_per_node=procs,
                   batch_per_worker=batch, strategy=Strategy.ALLREDUCE, storage=Storage.SYNTHETIC, repeat=0,
                   warmup_steps=3, measured_steps=steps, timeout_s=900, device=Device.CPU, seed=0)


@dataclass(frozen=True)
class Launch:
    throughput: float  # samples/s over the measured window
    startup_s: float  # process launch to the first measured step (warm-up steps included)
    fixed_s: float  # the launch's wall time less the measured window: its per-run fixed cost


def bare_launch(spec: RunSpec, work: Path) -> Launch:
    """benchmarks/bare_loop.py launched exactly as the harness launches its worker."""
    spec_file = work / "bare-spec.json"
    write_spec_file(spec_file, spec, work)
    request = LaunchRequest(spec, "frameworks.torch_ddp.worker", spec_file, sys.executable, os.cpu_count() or 1)
    command = launchers.get("torchrun")(request)
    prefix = list(command.argv[: len(command.argv) - len(worker_argv(request))])
    start, t0 = time.time(), time.perf_counter()
    out = subprocess.run(prefix + [str(HERE / "bare_loop.py"), str(spec_file)], env={**os.environ, **command.env,
                         "PYTHONPATH": str(provenance.REPO_ROOT)}, cwd=provenance.REPO_ROOT, capture_output=True,
                         text=True, check=True)
    wall = time.perf_counter() - t0
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return Launch(result["throughput"], result["start_time"] - start, wall - result["window_s"])


def harness_launch(spec: RunSpec, run_dir: Path) -> Launch:
    """One harness run (runner.run_one); start-up from the ranks' window records and launch_s."""
    start = time.time()
    row = run_one(spec, run_dir, new_sweep_id())
    if row["status"] != "ok":
        sys.exit(f"harness run failed: {row['reason']}")
    windows = [read_rank(run_dir, r).window for r in range(spec.world_size)]
    startup = max(w["start_time"] for w in windows) - start
    return Launch(row["throughput"], startup, row["launch_s"] - row["window_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", default="small", choices=["tiny", "small"])
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    spec = make_spec(Workload.RESNET50, Size(args.size), args.procs, 8, args.steps)
    harness_runs: list[Launch] = []
    bare_runs: list[Launch] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for round_index in range(args.rounds):
            harness_runs.append(harness_launch(spec, work / f"run{round_index}"))
            bare_runs.append(bare_launch(spec, work))
            h, b = harness_runs[-1], bare_runs[-1]
            print(f"round {round_index + 1}: harness {h.throughput:.2f} images/s, start-up {h.startup_s:.2f} s, "
                  f"fixed {h.fixed_s:.2f} s | bare {b.throughput:.2f} images/s, start-up {b.startup_s:.2f} s, "
                  f"fixed {b.fixed_s:.2f} s")

    def med(runs: list[Launch], name: str) -> float:
        return statistics.median(getattr(r, name) for r in runs)

    h, b = med(harness_runs, "throughput"), med(bare_runs, "throughput")
    hs, bs = med(harness_runs, "startup_s"), med(bare_runs, "startup_s")
    hf, bf = med(harness_runs, "fixed_s"), med(bare_runs, "fixed_s")
    machine = provenance.machine()
    config = f"resnet50/{args.size} batch 8, {args.procs} proc, 3 warm-up + {args.steps} steps"
    # the machine is shared: its 1-minute load average at the end says how much else was running
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, load {os.getloadavg()[0]:.1f})"
    print(f"median harness {h:.2f} images/s, bare loop {b:.2f} images/s, ratio {h / b:.3f} (goal >= 0.98)")
    print(f"median start-up (launch to first measured step): harness {hs:.2f} s, bare loop {bs:.2f} s, "
          f"difference {hs - bs:+.2f} s; fixed cost per run (launch wall time - measured window): harness "
          f"{hf:.2f} s, bare loop {bf:.2f} s, difference {hf - bf:+.2f} s")
    results = HERE / "RESULTS.md"
    if not results.exists():
        results.write_text("# Harness overhead (benchmarks/overhead.py)\n")
    text = results.read_text()
    if STARTUP_HEADER not in text:
        text += STARTUP_HEADER
    text += (f"| {provenance.utc_now()} | {where} | {config} | {args.rounds} | {h:.2f} | {b:.2f} | {h / b:.3f} | "
             f"{hs:.2f} | {bs:.2f} | {hf:.2f} | {bf:.2f} |\n")
    results.write_text(text)


STARTUP_HEADER = ("\n## Throughput and fixed cost per run (medians over rounds)\n\n"
                  "Start-up: process launch to the first measured step (warm-up included). Fixed cost: the launch's "
                  "wall time less its measured window (start-up and teardown).\n\n"
                  "| when (UTC) | machine | configuration | rounds | harness images/s | bare loop images/s | ratio | "
                  "harness start-up s | bare start-up s | harness fixed s | bare fixed s |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|\n")


if __name__ == "__main__":
    main()
