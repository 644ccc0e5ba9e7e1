"""Harness overhead: the harness's measured samples/s vs a bare training loop, side by side.

Both are launched the same way (torchrun, same threads per rank, same model, batch and
steps), interleaved round by round so that drift of a shared machine hits both alike.
Prints the medians and their ratio (goal: >= 0.98) and appends them to benchmarks/RESULTS.md
with the machine they ran on. Usage: python benchmarks/overhead.py [--rounds N] [--size small]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import launchers, provenance
from harness.axes import Device, Size, Storage, Strategy, Workload
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


def bare_throughput(spec: RunSpec, work: Path) -> float:
    """samples/s of benchmarks/bare_loop.py launched exactly as the harness launches its worker."""
    spec_file = work / "bare-spec.json"
    write_spec_file(spec_file, spec, work)
    request = LaunchRequest(spec, "frameworks.torch_ddp.worker", spec_file, sys.executable, os.cpu_count() or 1)
    command = launchers.get("torchrun")(request)
    prefix = list(command.argv[: len(command.argv) - len(worker_argv(request))])
    out = subprocess.run(prefix + [str(HERE / "bare_loop.py"), str(spec_file)], env={**os.environ, **command.env,
                         "PYTHONPATH": str(provenance.REPO_ROOT)}, cwd=provenance.REPO_ROOT, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["throughput"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", default="small", choices=["tiny", "small"])
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    spec = make_spec(Workload.RESNET50, Size(args.size), args.procs, 8, args.steps)
    harness_tp, bare_tp = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for round_index in range(args.rounds):
            row = run_one(spec, work / f"run{round_index}", new_sweep_id())
            if row["status"] != "ok":
                sys.exit(f"harness run failed: {row['reason']}")
            harness_tp.append(row["throughput"])
            bare_tp.append(bare_throughput(spec, work))
            print(f"round {round_index + 1}: harness {harness_tp[-1]:.2f} images/s, bare {bare_tp[-1]:.2f} images/s")
    h, b = statistics.median(harness_tp), statistics.median(bare_tp)
    machine = provenance.machine()
    line = (f"| {provenance.utc_now()} | {machine['cpu_model']} ({machine['cpu_cores']} cores) | resnet50/{args.size} "
            f"batch 8, {args.procs} proc, {args.steps} steps | {args.rounds} | {h:.2f} | {b:.2f} | {h / b:.3f} |")
    print(f"median harness {h:.2f} images/s, bare loop {b:.2f} images/s, ratio {h / b:.3f} (goal >= 0.98)")
    results = HERE / "RESULTS.md"
    if not results.exists():
        results.write_text("# Harness overhead (benchmarks/overhead.py)\n\n| when (UTC) | machine | configuration | "
                           "rounds | harness images/s (median) | bare loop images/s (median) | ratio |\n"
                           "|---|---|---|---|---|---|---|\n")
    with open(results, "a") as fh:
        fh.write(line + "\n")


if __name__ == "__main__":
    main()
