"""What else ran on the machine while a run was measured (psutil only; no deep-learning import here).

Every telemetry sample of a rank's supervisor (:mod:`harness.contract.telemetry`) carries the machine's
CPU seconds spent in processes (``/proc/stat``: user, nice and system, over every CPU), all its CPU
seconds (idle, I/O wait, interrupts and steal included), the steal seconds (time the hypervisor gave
to other guests), the 1-minute load average, the CPU frequency where the kernel reports one, the
kernel's boot id (ranks on one kernel share a machine, whatever their host names) and the rank's
compute threads (``OMP_NUM_THREADS``, which every launcher sets). The rank's own process tree's CPU
seconds are added by the sampler. Over the measured window, per machine:

* ``other_cpu_share`` = (machine's process CPU seconds - every rank's tree CPU seconds on it) / all
  CPU seconds: the share of the machine that processes outside the run used (0.5 on 2 cores = one
  core kept busy by something else);
* ``steal_share`` = steal seconds / all CPU seconds; ``load_avg`` the mean 1-minute load average
  (the run's own threads included: a context figure, not the criterion); ``cpu_mhz`` the mean
  current frequency (``scaling_cur_freq``, else ``/proc/cpuinfo``; empty where neither answers).

A row is ``machine_busy`` when, on any of its machines, other processes used at least ``BUSY_SHARE``
of the CPUs, or steal took at least ``BUSY_STEAL_SHARE``, or, with every core in use, the run's compute
threads plus the other load exceed the cores by ``OVERSUBSCRIBED_CORES`` or more (see
docs/measurement.md for why these).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable

import psutil

# A CPU-bound run that uses every core loses up to the other processes' share of the CPU time: 10% is
# over three times the compare gate's 3% floor, above what the run's own apparatus outside the ranks
# takes (the harness's poll, the launcher: measured in docs/measurement.md) and below the 25-50% that
# one busy process takes on 2 to 4 cores.
BUSY_SHARE = 0.10
BUSY_STEAL_SHARE = 0.10  # a hypervisor taking a tenth of the CPU time, as a busy neighbour would
# Compute threads and other runnable processes beyond the cores by this much, while the cores are all in
# use: threads of one parallel region wait for the one that was preempted, so the loss is far above the
# other load's share. (A GPU run's CPU threads mostly wait: with cores to spare nothing is preempted.)
OVERSUBSCRIBED_CORES = 0.5
SATURATED = 0.9  # the machine's process CPU time / its CPU time at which every core counts as in use
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _boot_id() -> str:
    try:
        with open(BOOT_ID) as fh:
            return fh.read().strip()
    except OSError:  # not Linux: the host name stands for the machine
        import socket

        return socket.gethostname()


def cpu_mhz() -> float | None:
    """The mean current CPU frequency (MHz) as the kernel reports it, or None where it does not."""
    try:
        freq = psutil.cpu_freq()
    except (OSError, NotImplementedError, RuntimeError):
        return None
    return float(freq.current) if freq and freq.current and freq.current > 0 else None


COMPUTE_THREADS_VARIABLE = "ROSETTA_COMPUTE_THREADS"  # overrides OMP_NUM_THREADS as the rank's compute threads


class MachineProbe:
    """The machine-wide fields of one telemetry sample."""

    def __init__(self) -> None:
        self.boot_id = _boot_id()
        # an emulated accelerator's rank sleeps its compute: its threads are not compute threads (launchers say 0)
        threads = os.environ.get(COMPUTE_THREADS_VARIABLE, os.environ.get("OMP_NUM_THREADS", ""))
        self.threads = int(threads) if threads.isdigit() and int(threads) > 0 else None

    def sample(self) -> dict[str, Any]:
        times = psutil.cpu_times()
        # guest time is already inside user and nice (psutil's own cpu_percent subtracts it likewise)
        guest = getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
        record: dict[str, Any] = {
            "machine_cpu_s": times.user + times.nice + times.system - guest,
            "machine_all_s": sum(times) - guest,
            "steal_s": getattr(times, "steal", 0.0),
            "load1": os.getloadavg()[0],
            "boot_id": self.boot_id,
        }
        mhz = cpu_mhz()
        if mhz is not None:
            record["cpu_mhz"] = mhz
        if self.threads is not None:
            record["threads"] = self.threads
        return record


def tree_cpu_seconds(processes: Iterable[psutil.Process]) -> float:
    """CPU seconds (user + system) of the processes alive, with their ended children they waited for."""
    total = 0.0
    for proc in processes:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


@dataclass(frozen=True)
class RankSpan:
    """One rank's samples bracketing its measured window: rates in cores (CPU seconds per second)."""

    machine: str
    machine_cores: float  # all CPU seconds per second: the machine's CPUs
    machine_busy_cores: float  # CPU seconds per second in processes, the run's included
    steal_cores: float
    tree_cores: float  # the rank's own process tree
    load1: float
    mhz: float | None
    threads: int | None


NEEDED = ("machine_cpu_s", "machine_all_s", "tree_cpu_s")


def rank_span(samples: list[dict[str, Any]], start: float, end: float) -> RankSpan | None:
    """The rank's rates between the last sample at or before ``start`` (Unix seconds; else the
    first) and the first at or after ``end`` (else the last); None without two such samples."""
    usable = sorted((s for s in samples if all(k in s for k in NEEDED)), key=lambda s: s["time"])
    before = [s for s in usable if s["time"] <= start]
    after = [s for s in usable if s["time"] >= end]
    if not usable:
        return None
    a = before[-1] if before else usable[0]
    b = after[0] if after else usable[-1]
    elapsed = b["time"] - a["time"]
    if elapsed <= 0:
        return None
    inside = [s for s in usable if a["time"] <= s["time"] <= b["time"]]
    mhz = [s["cpu_mhz"] for s in inside if s.get("cpu_mhz")]

    def rate(key: str) -> float:
        return (b.get(key, 0.0) - a.get(key, 0.0)) / elapsed

    return RankSpan(machine=str(a.get("boot_id", "")), machine_cores=rate("machine_all_s"),
                    machine_busy_cores=rate("machine_cpu_s"), steal_cores=rate("steal_s"),
                    tree_cores=rate("tree_cpu_s"), load1=sum(s["load1"] for s in inside) / len(inside),
                    mhz=sum(mhz) / len(mhz) if mhz else None, threads=a.get("threads"))


EMPTY = {"other_cpu_share": None, "load_avg": None, "steal_share": None, "cpu_mhz": None,
         "machine_busy": None, "busy_note": None}


def summarize(per_rank: Iterable[tuple[list[dict[str, Any]], float, float]]) -> dict[str, Any]:
    """Row fields from each rank's samples and window (start, end in Unix seconds): the busiest
    machine's figures, ``machine_busy`` and, when busy, a note saying why; empty without samples."""
    machines: dict[str, list[RankSpan]] = {}
    for samples, start, end in per_rank:
        span = rank_span(samples, start, end)
        if span is not None:
            machines.setdefault(span.machine, []).append(span)
    if not machines:
        return dict(EMPTY)
    figures = [machine_figures(spans) for spans in machines.values()]
    worst = max(figures, key=lambda f: (f["machine_busy"], f["other_cpu_share"]))
    mhz = [f["cpu_mhz"] for f in figures if f["cpu_mhz"] is not None]
    return {**worst, "load_avg": max(f["load_avg"] for f in figures),
            "steal_share": max(f["steal_share"] for f in figures), "cpu_mhz": min(mhz) if mhz else None}


def machine_figures(spans: list[RankSpan]) -> dict[str, Any]:
    """One machine's figures from the spans of the ranks it ran."""
    cores = sum(s.machine_cores for s in spans) / len(spans)
    busy = sum(s.machine_busy_cores for s in spans) / len(spans)
    other = max(0.0, busy - sum(s.tree_cores for s in spans))
    share = other / cores if cores > 0 else 0.0
    steal = sum(s.steal_cores for s in spans) / len(spans) / cores if cores > 0 else 0.0
    threads = sum(s.threads for s in spans) if all(s.threads for s in spans) else None
    saturated = cores > 0 and busy / cores >= SATURATED
    oversubscribed = saturated and threads is not None and threads + other >= round(cores) + OVERSUBSCRIBED_CORES
    reasons = []
    if share >= BUSY_SHARE or oversubscribed:
        reasons.append(f"other processes used {share:.0%} of the {round(cores)} CPUs ({other:.1f} cores)")
    if oversubscribed:
        reasons.append(f"beside the run's {threads} compute threads that oversubscribes the cores")
    if steal >= BUSY_STEAL_SHARE:
        reasons.append(f"the hypervisor took {steal:.0%} of the CPU time (steal)")
    mhz = [s.mhz for s in spans if s.mhz is not None]
    return {"other_cpu_share": share, "load_avg": sum(s.load1 for s in spans) / len(spans), "steal_share": steal,
            "cpu_mhz": sum(mhz) / len(mhz) if mhz else None, "machine_busy": bool(reasons),
            "busy_note": "; ".join(reasons) if reasons else None}
