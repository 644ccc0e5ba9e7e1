"""The emulated cluster beyond one process a GPU ([emulation] gpus_per_rank, gradient_scale; docs/scaling.md):
ResNet-50 on emulated V100s (the ``v100`` profile, FP32, batch 64 a GPU, exact steps), as in Horovod's
128-512 GPU benchmark and Goyal et al.'s 256: a 512-GPU point (32 hosts x 16 GPUs, a DGX-2's, one process a host) and a
1,024-GPU point (64 hosts x 16 GPUs), all over 25GbE-RoCE between hosts and NVLink in them, gradients at
1/32 of their size (where 64 host processes would not fit this machine's memory, as measured at the 512-GPU
point, 32 hosts of 32 GPUs instead, said in the table); and the reduction's agreement with the full-size emulation at 16 GPUs (2 hosts x 8 GPUs:
16 processes with the whole gradient each, against 2 processes standing for 8 GPUs each, 1/32 of it).

For each run: its emulated throughput and scaling efficiency (against one V100's profiled step), the wall
time a step took here (the emulated step x k), launch to exit, the peak memory (the sum of the ranks' peak
RSS as the row gives it; the peak of the summed RSS of every process in the run's hosts, supervisors, the
launcher's agents and the hosts' delay lines included, read every 2 s; how far this machine's available memory fell,
other users' included), and the CPU share (the run's processes' CPU seconds over wall x cores, and the
row's host_cpu_busy: the machine's, other users' included). Prints
the table and appends it to benchmarks/RESULTS.md with the machine and its load. Needs root (network
namespaces) and iptables (the links' delay lines).
Usage (.venv/bin on PATH: its mpirun): python benchmarks/emulated_scale.py [--points agreement,512,1024] [--steps 2] [--dilation 64] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import os
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
# Open MPI's: its agent on each host (orted) imports no torch, where torchrun's does (about 160 MB a host:
# 2 reduced hosts through torchrun took 0.79 GB of this machine's memory, 64 would not fit in 24 GiB)
LAUNCHER = "mpirun"
POINTS = {  # name: (hosts, processes a host, GPUs a process, gradient_scale)
    "16 GPUs, full size": (2, 8, 1, 1),
    "16 GPUs, reduced": (2, 1, 8, SCALE),
    "512 GPUs, reduced": (32, 1, 16, SCALE),  # 32 hosts of 16 V100s (a DGX-2's)
    "1,024 GPUs, reduced": (64, 1, 16, SCALE),
    "1,024 GPUs, reduced, 32 a host": (32, 1, 32, SCALE),  # where 64 host processes would not fit
}
GROUPS = {"agreement": ("16 GPUs, full size", "16 GPUs, reduced"), "16": ("16 GPUs, reduced",),
          "512": ("512 GPUs, reduced",), "1024": ("1,024 GPUs, reduced",)}
MEMORY_SHARE = 0.8  # of the memory available now, what a run may take (the rest: the other users')


def fits(run: dict, hosts: int) -> str | None:
    """Why ``hosts`` host processes would not fit this machine's available memory, from ``run``'s summed RSS a
    host (an over-estimate: each process's RSS counts the libraries it shares with the others), or None."""
    per_host = run["run_rss_gb"] * 1e9 / POINTS[run["name"]][0]
    available = psutil.virtual_memory().available
    if hosts * per_host <= MEMORY_SHARE * available:
        return None
    return (f"{hosts} host processes at {per_host / 1e6:.0f} MB each (the summed RSS a host of the "
            f"{run['name']} run) need {hosts * per_host / 1e9:.1f} GB, over {MEMORY_SHARE:.0%} of the "
            f"{available / 1e9:.1f} GB available")


def _doc(hosts: dict[str, str], nodes: int, procs: int, gpus: int, scale: int, args: argparse.Namespace) -> dict:
    names = list(hosts)[:nodes]
    return {"name": f"scale-{nodes}x{procs}x{gpus}-s{scale}",
            "settings": {"device": "emulated", "warmup_steps": 1, "measured_steps": args.steps, "repeats": 1,
                         "timeout_s": 3600},
            "emulation": {"accelerator": "v100", "exchange": "gradients", "intra_link": "NVLink",
                          "inter_link": "25GbE-RoCE", "dilation": args.dilation, "step_variation": "none",
                          "gpus_per_rank": gpus, "gradient_scale": scale},
            "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "full", "batch_per_worker": BATCH,
                       "nodes": nodes, "procs_per_node": procs, "launcher": LAUNCHER},
            "launcher_options": {LAUNCHER: {"hosts": names, "addresses": [hosts[n] for n in names],
                                              "remote": "netns"}}}


class Watch:
    """A run's processes (every process in its hosts' network namespaces: ranks, their supervisors, the
    launcher's agents, the hosts' delay lines) read every 2 s: the peak of their summed RSS, their CPU
    seconds (each process's last reading: one that ended between readings loses under 2 s of it), and this
    machine's least available memory (every user's)."""

    def __init__(self, hosts: list[str]):
        self.namespaces = {os.stat(f"/run/netns/{h}").st_ino for h in hosts}
        self.start = self.least = psutil.virtual_memory().available
        self.peak_rss, self.cpu = 0, {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _in_hosts(self, pid: int) -> bool:
        try:
            return os.stat(f"/proc/{pid}/ns/net").st_ino in self.namespaces
        except OSError:
            return False

    def _watch(self) -> None:
        while not self.done.wait(2.0):
            rss = 0
            for p in psutil.process_iter(["pid", "memory_info", "cpu_times"]):
                if p.info["memory_info"] and p.info["cpu_times"] and self._in_hosts(p.info["pid"]):
                    rss += p.info["memory_info"].rss
                    self.cpu[p.info["pid"]] = p.info["cpu_times"].user + p.info["cpu_times"].system
            self.peak_rss = max(self.peak_rss, rss)
            self.least = min(self.least, psutil.virtual_memory().available)

    def stop(self) -> tuple[float, float, float]:
        """The peak summed RSS (bytes), the CPU seconds, and the fall in available memory (bytes)."""
        self.done.set()
        self.thread.join()
        return self.peak_rss, sum(self.cpu.values()), self.start - self.least


def _rss_sum_gb(row: dict) -> float | None:
    """The sum of the ranks' peak RSS (GB) from the row's per-rank list (JSON, MB), None without it."""
    ranks = row.get("rank_peak_rss_mb")
    if not isinstance(ranks, str) or not ranks:
        return None
    return sum(v for v in json.loads(ranks) if v is not None) / 1e3


def _run(name: str, hosts: dict[str, str], args: argparse.Namespace, results: Path) -> dict:
    nodes, procs, gpus, scale = POINTS[name]
    watch, t0 = Watch(list(hosts)[:nodes]), time.perf_counter()
    [row] = run_sweep(scenario.parse(_doc(hosts, nodes, procs, gpus, scale, args), "scale",
                                     default_name=name), results)
    wall, (rss, cpu_s, fell) = time.perf_counter() - t0, watch.stop()
    out = {"name": name, "status": row["status"], "reason": row.get("reason"), "gpus": nodes * procs * gpus,
           "processes": nodes * procs, "wall_s": wall, "memory_fell_gb": fell / 1e9, "run_rss_gb": rss / 1e9,
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
        runs = []
        for i, name in enumerate(names):
            before = next((r for r in reversed(runs) if r.get("run_rss_gb")), None)
            why = fits(before, POINTS[name][0]) if before and POINTS[name][0] > 2 else None
            if why:  # what does fit instead: as many GPUs on the processes that did
                print(f"{name}: not run: {why}", flush=True)
                runs.append({"name": name, "status": "not run", "reason": why, "processes": POINTS[name][0],
                             "wall_s": 0.0, "run_rss_gb": 0.0, "memory_fell_gb": 0.0, "cpu_share": 0.0})
                name = f"{name}, 32 a host"
                if name not in POINTS:
                    continue
            runs.append(_run(name, hosts, args, Path(tmp) / str(i)))
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
             "launch to exit (s) | ranks' peak RSS sum (GB) | run's processes' peak RSS sum (GB) | available memory fell "
             "(GB) | run's CPU share | machine busy | saturated |", "|" + "---|" * 14]
    for r in runs:
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['reason']}"
        lines.append(f"| {r['name']} | {r['processes']} | {status} | {_cell(r, 'throughput', ',.0f')} | "
                     f"{_cell(r, 'efficiency', '.1%')} | {_cell(r, 'step_s', '.4f')} | {_cell(r, 'step_wall_s', '.1f')} | "
                     f"{r['wall_s']:.0f} | {_cell(r, 'rss_sum_gb', '.1f')} | {r['run_rss_gb']:.1f} | {r['memory_fell_gb']:.1f} | "
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
