"""Harness overhead, per framework: the harness's measured samples/s vs a bare training loop of the same
model and settings, side by side, and the fixed cost of a run (start-up: process launch to the first
measured step; and launch wall time less the measured window), harness vs bare loop.

For each framework (default: every one installed here), the bare loop is benchmarks/bare_loops/<framework>.py:
the worker's model, batch, optimizer, precision and process settings, built by the same functions, without
the harness's machinery. Both are launched alike: the bare loop's command is the harness's own for that
framework's default launcher (torchrun, mpirun or horovodrun: same threads per rank and environment) with
the worker module swapped for the bare loop. Harness and bare launches are interleaved round by round, and
within a round framework after framework, so that drift of a shared machine hits both alike.
Prints the medians and their ratios per framework (goal: throughput ratio >= 0.98) and appends them to
benchmarks/RESULTS.md as one table, with the machine they ran on and its load.
Usage: python benchmarks/overhead.py [--frameworks torch_ddp,chainer,...] [--rounds N] [--size small]
       [--procs P] [--warmup W] [--steps S] [--results FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from pathlib import Path

import frameworks
from harness.contract.axes import Device, Precision, Size, Storage, Strategy, Workload
from harness.contract.events import read_rank
from harness.contract.spec import RunSpec
from harness.contract.workloads import WORKLOADS
from harness.launchers import LaunchRequest, worker_argv
from harness.results import provenance
from harness.running.runner import new_sweep_id, prepare, run_one, skip_reason

HERE = Path(__file__).resolve().parent
BATCH = 8


def make_spec(framework: str, workload: Workload, size: Size, procs: int, batch: int, warmup: int,
              steps: int, device: Device = Device.CPU, precision: Precision = Precision.FP32) -> RunSpec:
    """The run both sides train: the framework's default launcher, synthetic data."""
    return RunSpec(scenario="overhead", framework=framework, workload=workload, size=size,
                   workload_options=WORKLOADS[workload].options(size), nodes=1, procs_per_node=procs,
                   batch_per_worker=batch, strategy=Strategy.ALLREDUCE, storage=Storage.SYNTHETIC, repeat=0,
                   warmup_steps=warmup, measured_steps=steps, timeout_s=900, device=device, seed=0,
                   launcher=frameworks.get(framework).launcher, precision=precision)


@dataclass(frozen=True)
class Launch:
    throughput: float  # samples/s over the measured window
    startup_s: float  # process launch to the first measured step (warm-up steps included)
    fixed_s: float  # the launch's wall time less the measured window: its per-run fixed cost


def bare_loop_reason(framework: str) -> str | None:
    """Why ``framework`` has no bare loop to measure against (benchmarks/bare_loops/<framework>.py), or None."""
    if (HERE / "bare_loops" / f"{framework}.py").exists():
        return None
    return f"no bare loop (benchmarks/bare_loops/{framework}.py) yet"


def bare_argv(spec: RunSpec, run_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The harness's launch command for ``spec`` (runner.prepare: spec file, launcher) with its per-rank
    ``-m harness.contract.worker MODULE SPEC`` swapped for ``-m benchmarks.bare_loops.<framework> SPEC``; and its
    environment."""
    command = prepare(spec, run_dir)
    tail = worker_argv(LaunchRequest(spec, frameworks.get(spec.framework).worker_module, run_dir / "spec.json",
                                     sys.executable, 1))
    if list(command.argv[-len(tail):]) != tail or command.setup or command.also or command.files:
        raise SystemExit(f"{spec.framework}: the {spec.launcher} command does not end with the worker's; "
                         f"cannot swap in the bare loop: {command.argv}")
    argv = [*command.argv[: -len(tail)], "-m", f"benchmarks.bare_loops.{spec.framework}", tail[-1]]
    return argv, dict(command.env)


def bare_launch(spec: RunSpec, run_dir: Path) -> Launch:
    """The framework's bare loop, launched exactly as the harness launches its worker (same command,
    environment and folder), in a process group of its own."""
    argv, env = bare_argv(spec, run_dir)
    start, t0 = time.time(), time.perf_counter()
    proc = subprocess.Popen(argv, env={**os.environ, **env}, cwd=provenance.REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, process_group=0)
    try:
        out, err = proc.communicate(timeout=spec.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        sys.exit(f"{spec.framework}: bare loop timed out after {spec.timeout_s:.0f} s: {' '.join(argv)}")
    wall = time.perf_counter() - t0
    # rank 0's JSON line: under mpirun and horovodrun a rank tag ("[1,0]<stdout>:") stands before it; anything
    # after the JSON object is left aside
    line = next((s for s in reversed(out.splitlines()) if '"throughput"' in s), None)
    if proc.returncode != 0 or line is None:
        sys.exit(f"{spec.framework}: bare loop failed (exit {proc.returncode}): {' '.join(argv)}\n"
                 f"{(out + err)[-3000:]}")
    result = json.JSONDecoder().raw_decode(line, line.index("{"))[0]
    return Launch(result["throughput"], result["start_time"] - start, wall - result["window_s"])


def harness_launch(spec: RunSpec, run_dir: Path) -> Launch:
    """One harness run (runner.run_one); start-up from the ranks' window records and launch_s."""
    start = time.time()
    row = run_one(spec, run_dir, new_sweep_id())
    if row["status"] != "ok":
        sys.exit(f"{spec.framework}: harness run {row['status']}: {row['reason']}")
    windows = [read_rank(run_dir, r).window for r in range(spec.world_size)]
    startup = max(w["start_time"] for w in windows) - start
    return Launch(row["throughput"], startup, row["launch_s"] - row["window_s"])


def median(launches: list[Launch]) -> Launch:
    return Launch(*(statistics.median(getattr(launch, f.name) for launch in launches) for f in fields(Launch)))


def choose(asked: str | None, workload: Workload) -> list[str]:
    """The frameworks to measure: those asked for (each must be able to run here), else every one that can."""
    if asked:
        names = [n.strip() for n in asked.split(",") if n.strip()]
        unknown = [n for n in names if n not in frameworks.names()]
        if unknown:
            sys.exit(f"unknown framework(s) {', '.join(unknown)}; known: {', '.join(frameworks.names())}")
        return names
    chosen = []
    for name in frameworks.names():
        reason = bare_loop_reason(name) or skip_reason(make_spec(name, workload, Size.TINY, 1, BATCH, 1, 1))
        if reason:
            print(f"{name}: left out: {reason}")
        else:
            chosen.append(name)
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", help="comma-separated (default: every framework installed here)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workload", default="resnet50", choices=["resnet50", "bert"])
    parser.add_argument("--size", default="small", choices=[s.value for s in Size])
    parser.add_argument("--batch", type=int, default=BATCH, help="per worker")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="fp32", choices=[p.value for p in Precision])
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md", help="the Markdown file to append to")
    args = parser.parse_args()
    workload, device, precision = Workload(args.workload), Device(args.device), Precision(args.precision)
    specs = {name: make_spec(name, workload, Size(args.size), args.procs, args.batch, args.warmup, args.steps,
                             device, precision)
             for name in choose(args.frameworks, workload)}
    for name, spec in specs.items():
        reason = bare_loop_reason(name) or skip_reason(spec)
        if reason:
            sys.exit(f"{name} cannot run here: {reason}")
    runs: dict[str, dict[str, list[Launch]]] = {name: {"harness": [], "bare": []} for name in specs}
    unit = WORKLOADS[workload].sample_unit
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for round_index in range(args.rounds):
            for name, spec in specs.items():
                runs[name]["harness"].append(harness_launch(spec, work / name / f"harness{round_index}"))
                runs[name]["bare"].append(bare_launch(spec, work / name / f"bare{round_index}"))
                h, b = runs[name]["harness"][-1], runs[name]["bare"][-1]
                print(f"round {round_index + 1} {name}: harness {h.throughput:.2f} {unit}/s, start-up "
                      f"{h.startup_s:.2f} s, fixed {h.fixed_s:.2f} s | bare {b.throughput:.2f} {unit}/s, start-up "
                      f"{b.startup_s:.2f} s, fixed {b.fixed_s:.2f} s", flush=True)

    rows = []
    for name, spec in specs.items():
        h, b = (median(runs[name][side]) for side in ("harness", "bare"))
        print(f"{name} ({spec.launcher}): median harness {h.throughput:.2f} {unit}/s, bare loop {b.throughput:.2f} "
              f"{unit}/s, ratio {h.throughput / b.throughput:.3f} (goal >= 0.98); start-up (launch to first measured "
              f"step) harness {h.startup_s:.2f} s, bare {b.startup_s:.2f} s, difference "
              f"{h.startup_s - b.startup_s:+.2f} s; fixed cost per run (launch wall time - measured window) harness "
              f"{h.fixed_s:.2f} s, bare {b.fixed_s:.2f} s, difference {h.fixed_s - b.fixed_s:+.2f} s")
        rows.append(f"| {name} | {spec.launcher} | {h.throughput:.2f} | {b.throughput:.2f} | "
                    f"{h.throughput / b.throughput:.3f} | {h.startup_s:.2f} | {b.startup_s:.2f} | {h.fixed_s:.2f} | "
                    f"{b.fixed_s:.2f} |\n")
    machine = provenance.machine()
    # the machine may be shared: its 1-minute load average at the end says how much else was running
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, load {os.getloadavg()[0]:.1f})"
    if device == Device.CUDA:
        where = f"{where}, {provenance.gpu_name()} (driver {provenance.gpu_driver()})"
    config = (f"{workload.value}/{args.size} batch {args.batch}, {args.procs} proc, {args.warmup} warm-up + "
              f"{args.steps} steps, synthetic data, {device.value}, {precision.value}")
    results = args.results
    text = results.read_text() if results.exists() else "# Harness overhead (benchmarks/overhead.py)\n"
    text += (f"\n## Harness vs bare loop per framework (benchmarks/overhead.py), {provenance.utc_now()}\n\n"
             f"{where}; {config}; medians over {args.rounds} rounds, harness and bare loop launched alternately by "
             f"the framework's launcher. Start-up: process launch to the first measured step (warm-up included). "
             f"Fixed cost: the launch's wall time less its measured window (start-up and teardown).\n\n"
             f"{TABLE_HEADER}{''.join(rows)}")
    results.write_text(text)


TABLE_HEADER = ("| framework | launcher | harness samples/s | bare loop samples/s | ratio | harness start-up s | "
                "bare start-up s | harness fixed s | bare fixed s |\n|---|---|---|---|---|---|---|---|---|\n")


if __name__ == "__main__":
    main()
