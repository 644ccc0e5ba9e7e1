"""A container's overhead: the same run on this machine's environment (the framework's default launcher) and in
the framework's CPU image (the podman launcher, tools/container_images.py), launched alternately round by
round so that drift of a shared machine hits both alike. Prints the medians and their ratios (throughput in the
container / on the host; start-up and fixed cost per run, in seconds) and appends them to benchmarks/RESULTS.md
with the machine and its load.

Usage: python benchmarks/containers.py [--frameworks torch_ddp,tf_mwms] [--rounds N] [--size tiny]
       [--procs P] [--warmup W] [--steps S] [--results FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from overhead import BATCH, Launch, harness_launch, make_spec, median

import frameworks
from harness.contract.axes import Size, Workload
from harness.contract.workloads import WORKLOADS
from harness.results import provenance
from harness.running.runner import skip_reason

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("container_images", HERE.parent / "tools" / "container_images.py")
container_images = importlib.util.module_from_spec(_spec)
sys.modules["container_images"] = container_images
_spec.loader.exec_module(container_images)
TABLE_HEADER = ("| framework | host launcher | image | host samples/s | container samples/s | ratio | host start-up s | "
                "container start-up s | host fixed s | container fixed s |\n|---|---|---|---|---|---|---|---|---|---|\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch_ddp", help="comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="tiny", choices=[s.value for s in Size])
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md", help="the Markdown file to append to")
    args = parser.parse_args()
    reason = container_images.unavailable_reason()
    if reason:
        sys.exit(reason)
    pairs = {}
    for name in (n.strip() for n in args.frameworks.split(",")):
        host = make_spec(name, Workload.RESNET50, Size(args.size), args.procs, BATCH, args.warmup, args.steps)
        image = container_images.build(frameworks.get(name).image_name)
        inside = dataclasses.replace(host, launcher="podman", launcher_options={"image": image})
        for spec in (host, inside):
            if (why := skip_reason(spec)):
                sys.exit(f"{name} ({spec.launcher}) cannot run here: {why}")
        pairs[name] = (host, inside, image)
    runs: dict[str, dict[str, list[Launch]]] = {name: {"host": [], "container": []} for name in pairs}
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            for name, (host, inside, _) in pairs.items():
                runs[name]["host"].append(harness_launch(host, Path(tmp) / name / f"host{round_index}"))
                runs[name]["container"].append(harness_launch(inside, Path(tmp) / name / f"container{round_index}"))
                h, c = runs[name]["host"][-1], runs[name]["container"][-1]
                print(f"round {round_index + 1} {name}: host {h.throughput:.2f}/s start-up {h.startup_s:.2f} s | "
                      f"container {c.throughput:.2f}/s start-up {c.startup_s:.2f} s", flush=True)
    rows, rounds = [], []
    unit = WORKLOADS[Workload.RESNET50].sample_unit
    for name, (host, _, image) in pairs.items():
        h, c = (median(runs[name][side]) for side in ("host", "container"))
        print(f"{name}: median host {h.throughput:.2f} {unit}/s, container {c.throughput:.2f} {unit}/s, ratio "
              f"{c.throughput / h.throughput:.3f}; start-up host {h.startup_s:.2f} s, container {c.startup_s:.2f} s; "
              f"fixed cost host {h.fixed_s:.2f} s, container {c.fixed_s:.2f} s")
        rows.append(f"| {name} | {host.launcher} | `{image}` | {h.throughput:.2f} | {c.throughput:.2f} | "
                    f"{c.throughput / h.throughput:.3f} | {h.startup_s:.2f} | {c.startup_s:.2f} | {h.fixed_s:.2f} | "
                    f"{c.fixed_s:.2f} |\n")
        rounds.append(f"{name}, each round's {unit}/s host / container: " + ", ".join(
            f"{a.throughput:.2f} / {b.throughput:.2f}" for a, b in zip(runs[name]["host"], runs[name]["container"])))
    machine = provenance.machine()
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, load {os.getloadavg()[0]:.1f})"
    config = (f"resnet50/{args.size} batch {BATCH}, {args.procs} procs, {args.warmup} warm-up + {args.steps} steps, "
              f"synthetic data, cpu")
    text = args.results.read_text() if args.results.exists() else ""
    text += (f"\n## A container's overhead (benchmarks/containers.py), {provenance.utc_now()}\n\n"
             f"{where}; {config}; medians over {args.rounds} rounds, host (the framework's launcher, this machine's "
             f"environment) and container (the podman launcher, the framework's CPU image, a container per rank) "
             f"launched alternately. Ratio: container throughput / host throughput. Start-up: launch to the first "
             f"measured step; fixed: launch wall time less the measured window.\n\n{TABLE_HEADER}{''.join(rows)}\n"
             + "".join(f"- {line}\n" for line in rounds))
    args.results.write_text(text)


if __name__ == "__main__":
    main()
