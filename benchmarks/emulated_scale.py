"""The emulated cluster beyond one process a GPU ([emulation] gpus_per_rank, gradient_scale; docs/scaling.md):
ResNet-50 on emulated V100s (the ``v100`` profile, FP32, batch 64 a GPU, exact steps), as in Horovod's
128-512 GPU benchmark and Goyal et al.'s 256: a 512-GPU point (64 hosts x 8 GPUs, one process a host) and a
1,024-GPU point (64 hosts x 16 GPUs), both over 25GbE-RoCE between hosts and NVLink in them, gradients at
1/32 of their size; and the reduction's agreement with the full-size emulation at 16 GPUs (2 hosts x 8 GPUs:
16 processes with the whole gradient each, against 2 processes standing for 8 GPUs each, 1/32 of it).

For each run: its emulated throughput and scaling efficiency (against one V100's profiled step), the wall
time a step took here (the emulated step x k), launch to exit, the peak memory (the sum of the ranks' peak
RSS as the row gives it, and how far this machine's available memory fell while it ran, which counts the
supervisors, the launcher's agents and the hosts' delay lines too), and the CPU share (the run's processes'
CPU seconds over wall x cores, and the row's host_cpu_busy: the machine's, other users' included). Prints
the table and appends it to benchmarks/RESULTS.md with the machine and its load. Needs root (network
namespaces) and iptables (the links' delay lines).
Usage: python benchmarks/emulated_scale.py [--points agreement,512,1024] [--steps 2] [--dilation 64] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import threading
import time
from pathlib import Path

import psutil

from harness.experiment import scenario
from harness.launchers.hosts import namespace_hosts
from harness.results import provenance
from harness.running.runner import run_sweep

HERE = Path(__file__).resolve().parent
BATCH = 64
SCALE = 32  # gradient_scale of the reduced runs
POINTS = {  # name: (hosts, processes a host, GPUs a process, gradient_scale)
    "16 GPUs, full size": (2, 8, 1, 1),
    "16 GPUs, reduced": (2, 1, 8, SCALE),
    "512 GPUs, reduced": (64, 1, 8, SCALE),
    "1,024 GPUs, reduced": (64, 1, 16, SCALE),
}
GROUPS = {"agreement": ("16 GPUs, full size", "16 GPUs, reduced"), "512": ("512 GPUs, reduced",),
          "1024": ("1,024 GPUs, reduced",)}


def _doc(hosts: dict[str, str], nodes: int, procs: int, gpus: int, scale: int, args: argparse.Namespace) -> dict:
    names = list(hosts)[:nodes]
    return {"name": f"scale-{nodes}x{procs}x{gpus}-s{scale}",
            "settings": {"device": "emulated", "warmup_steps": 1, "measured_steps": args.steps, "repeats": 1,
                         "timeout_s": 3600},
            "emulation": {"accelerator": "v100", "exchange": "gradients", "intra_link": "NVLink",
                          "inter_link": "25GbE-RoCE", "dilation": args.dilation, "step_variation": "none",
                          "gpus_per_rank": gpus, "gradient_scale": scale},
            "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "full", "batch_per_worker": BATCH,
                       "nodes": nodes, "procs_per_node": procs, "launcher": "torchrun"},
            "launcher_options": {"torchrun": {"hosts": names, "addresses": [hosts[n] for n in names],
                                              "remote": "netns"}}}


class MemoryFloor:
    """This machine's least available memory while a run ran (a thread reading it every half second)."""

    def __init__(self):
        self.start = self.least = psutil.virtual_memory().available
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(0.5):
            self.least = min(self.least, psutil.virtual_memory().available)

    def stop(self) -> float:
        """The fall in available memory (bytes) from the run's start to its lowest."""
        self.done.set()
        self.thread.join()
        return self.start - self.least


def _rss_sum_gb(row: dict) -> float | None:
    """The sum of the ranks' peak RSS (GB) from the row's per-rank list (JSON, MB), None without it."""
    ranks = row.get("rank_peak_rss_mb")
    if not isinstance(ranks, str) or not ranks:
        return None
    return sum(v for v in json.loads(ranks) if v is not None) / 1e3


def _run(name: str, hosts: dict[str, str], args: argparse.Namespace, results: Path) -> dict:
    nodes, procs, gpus, scale = POINTS[name]
    before, floor, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), MemoryFloor(), time.perf_counter()
    [row] = run_sweep(scenario.parse(_doc(hosts, nodes, procs, gpus, scale, args), "scale",
                                     default_name=name), results)
    wall, fell = time.perf_counter() - t0, floor.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    out = {"name": name, "status": row["status"], "reason": row.get("reason"), "gpus": nodes * procs * gpus,
           "processes": nodes * procs, "wall_s": wall, "memory_fell_gb": fell / 1e9,
           "cpu_share": cpu_s / (wall * (os.cpu_count() or 1))}
    if row["status"] == "ok":
        one_gpu = BATCH / row["compute_s"]
        out.update(throughput=row["throughput"], efficiency=row["throughput"] / (out["gpus"] * one_gpu),
                   step_s=row["step_time_p50_s"], dilation=row["dilation"],
                   step_wall_s=row["step_time_p50_s"] * row["dilation"], host_cpu_busy=row["host_cpu_busy"],
                   rss_sum_gb=_rss_sum_gb(row), saturated=row["emulation_saturated"])
    print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", default="agreement,512,1024", help=f"of {', '.join(GROUPS)}")
    parser.add_argument("--steps", type=int, default=2, help="measured steps a run (one warm-up before)")
    parser.add_argument("--dilation", type=float, default=64.0, help="time dilation k of every run")
    parser.add_argument("--no-record", action="store_true", help="print the table only (not into RESULTS.md)")
    args = parser.parse_args()
    names = [n for g in args.points.split(",") for n in GROUPS[g]]
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    with namespace_hosts(max(POINTS[n][0] for n in names), prefix="rosetta-scale") as hosts, \
            tempfile.TemporaryDirectory() as tmp:
        runs = [_run(name, hosts, args, Path(tmp) / str(i)) for i, name in enumerate(names)]
    report(runs, args, started, load_before, os.getloadavg(), record=not args.no_record)


def _cell(run: dict, key: str, fmt: str) -> str:
    value = run.get(key)
    return "" if value is None else format(value, fmt)


def report(runs: list[dict], args: argparse.Namespace, started: str, load_before, load_after,
           record: bool = True) -> None:
    lines = [f"## The emulated cluster beyond one process a GPU (benchmarks/emulated_scale.py), {started} UTC", "",
             f"ResNet-50 on emulated V100s (FP32, batch {BATCH} a GPU, exact steps), 25GbE-RoCE between hosts, "
             f"NVLink in them, k = {args.dilation:g}, 1 warm-up and {args.steps} measured steps a run. Machine: "
             f"{provenance.cpu_model()}, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
             f"load average (1, 5, 15 min) {', '.join(f'{x:.1f}' for x in load_before)} before, "
             f"{', '.join(f'{x:.1f}' for x in load_after)} after (the cores shared with other work).", "",
             "| run | processes | status | images/s | efficiency | step (s, cluster's) | wall a step (s) | "
             "launch to exit (s) | ranks' peak RSS sum (GB) | available memory fell (GB) | run's CPU share | "
             "machine busy | saturated |", "|" + "---|" * 13]
    for r in runs:
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['reason']}"
        lines.append(f"| {r['name']} | {r['processes']} | {status} | {_cell(r, 'throughput', ',.0f')} | "
                     f"{_cell(r, 'efficiency', '.1%')} | {_cell(r, 'step_s', '.4f')} | {_cell(r, 'step_wall_s', '.1f')} | "
                     f"{r['wall_s']:.0f} | {_cell(r, 'rss_sum_gb', '.1f')} | {r['memory_fell_gb']:.1f} | "
                     f"{r['cpu_share']:.0%} | {_cell(r, 'host_cpu_busy', '.0%')} | {r.get('saturated', '')} |")
    by = {r["name"]: r for r in runs}
    full, reduced = by.get("16 GPUs, full size"), by.get("16 GPUs, reduced")
    if full and reduced and "efficiency" in full and "efficiency" in reduced:
        lines += ["", f"Agreement at 16 GPUs: reduced {reduced['efficiency']:.1%} against full size "
                      f"{full['efficiency']:.1%} ({(reduced['efficiency'] - full['efficiency']) * 100:+.1f} points)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if record:
        with open(HERE / "RESULTS.md", "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
