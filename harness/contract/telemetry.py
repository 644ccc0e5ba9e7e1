"""Telemetry of every rank, sampled by its supervisor (harness.contract.worker), off the training process.

Each rank's supervisor samples, every ``SAMPLE_S`` seconds, the CPU use and resident memory of
the worker and all its descendants (DataLoader workers included) with psutil, and, where NVIDIA's
management library answers (nvidia-ml-py), the utilization, memory, power and SM clock of the
rank's GPU. Samples go to ``telemetry-rank<R>.jsonl`` beside the event records; the row gets
their summary over the measured window. Without a GPU the GPU fields are empty, never zero.

Each sample also says what else ran on the machine (:mod:`harness.contract.machine_load`): the
machine's CPU seconds from ``/proc/stat`` (psutil), the rank's own process tree's CPU seconds (the
supervisor included, and on an emulated host its links' delay line), the load average and the CPU
frequency where the kernel reports one, so that a row measured while other processes took the CPUs is
marked (``machine_busy``).

An emulated cluster's run (harness.machines.emulated_cluster) stretches its steps k times, so it samples less
often (:func:`sample_period_s`): a sample walks the machine's process table (psutil finds a tree's children
in every ``/proc`` entry: 16.6 ms of CPU with 194 processes during a 32-rank run, 4.9 ms with 258 on a quiet
machine): 32 ranks sampling twice a real second would take about half of a 2-core machine (16.6 ms x 64), CPU
the emulated cluster does not have.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Iterable

import psutil

from harness.base import delay_line
from harness.contract import machine_load

SAMPLE_S = 0.5  # seconds between samples, and the shortest period
WINDOW_SAMPLES = 20  # an emulated cluster's run samples its shortest possible window at least this often
# Row column -> (sample field, how ranks' samples are combined), in the window.
SUMMARY = {
    "cpu_util_pct": ("cpu_percent", "mean"),  # % of one core per rank (200 = two cores busy)
    "rss_max_mb": ("rss_mb", "max"),
    "gpu_util_pct": ("gpu_util_pct", "mean"),
    "gpu_mem_max_mb": ("gpu_mem_mb", "max"),
    "gpu_power_w": ("gpu_power_w", "mean"),
    "gpu_sm_clock_mhz": ("gpu_sm_clock_mhz", "mean"),
}


def telemetry_path(out_dir: Path, rank: int) -> Path:
    return Path(out_dir) / f"telemetry-rank{rank}.jsonl"


def sample_period_s(spec: Any) -> float:
    """Seconds between a rank's samples: SAMPLE_S, or for an emulated cluster's run (dilation k above 1)
    its shortest possible measured window in real seconds (every step at least the profiled compute, k
    times) over WINDOW_SAMPLES, where that is longer. ``spec``: the rank's RunSpec (a CommSpec has none)."""
    emulation = getattr(spec, "emulation", None) or {}
    k = float(emulation.get("dilation") or 1.0)
    if k <= 1.0:
        return SAMPLE_S
    return max(SAMPLE_S, spec.measured_steps * float(emulation["compute_s"]) * k / WINDOW_SAMPLES)


class Sampler:
    """Samples one worker process tree and, if there is one, its GPU."""

    def __init__(self, pid: int, gpu_index: int, supervisor_pid: int | None = None):
        self.process = psutil.Process(pid)
        # the supervisor (this sampler's process) is the run's too: its CPU is not "other" load
        self.supervisor = psutil.Process(supervisor_pid or os.getpid())
        # an emulated host's delay line holds its links' packets for the run: its CPU is the run's, not
        # other load (counted once a host, by the rank of GPU 0)
        line = delay_line.running() if gpu_index == 0 else None
        try:
            self.apparatus = [psutil.Process(line)] if line else []
        except psutil.Error:
            self.apparatus = []
        self._known: dict[int, psutil.Process] = {}
        self.gpu = _nvml_handle(gpu_index)
        self.machine = machine_load.MachineProbe()

    def sample(self) -> dict[str, Any]:
        record: dict[str, Any] = {"time": time.time(), **self._cpu(), **self.machine.sample()}
        if self.gpu is not None:
            record.update(_gpu_sample(self.gpu))
        return record

    def _cpu(self) -> dict[str, float]:
        # cpu_percent compares with the previous call on the same Process object: keep them.
        try:
            tree = [self.process, *self.process.children(recursive=True)]
        except psutil.Error:
            return {}
        cpu = rss = 0.0
        for proc in tree:
            proc = self._known.setdefault(proc.pid, proc)
            try:
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
            except psutil.Error:
                continue
        return {"cpu_percent": cpu, "rss_mb": rss / 2**20,
                "tree_cpu_s": machine_load.tree_cpu_seconds([self.supervisor, *self.apparatus, *tree])}


def _nvml_handle(index: int):
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001 - no library, no driver or no GPU: no GPU telemetry
        return None


def _gpu_sample(handle) -> dict[str, float]:
    import pynvml

    try:
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return {"gpu_util_pct": float(util.gpu), "gpu_mem_mb": memory.used / 2**20,
                "gpu_power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                "gpu_sm_clock_mhz": float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))}
    except pynvml.NVMLError:
        return {}


def read(out_dir: Path, rank: int) -> list[dict[str, Any]]:
    """A rank's samples (a torn last line is skipped)."""
    path = telemetry_path(out_dir, rank)
    if not path.exists():
        return []
    samples = []
    for line in path.read_text().splitlines():
        try:
            samples.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return samples


def summarize(per_rank: Iterable[tuple[list[dict[str, Any]], float, float]]) -> dict[str, float | None]:
    """Row fields from each rank's samples inside its window (start, end in Unix seconds).

    A field no sample carries is None (no GPU: empty, not zero).
    """
    values: dict[str, list[float]] = {column: [] for column in SUMMARY}
    for samples, start, end in per_rank:
        inside = [s for s in samples if start <= s["time"] <= end]
        for column, (field, _) in SUMMARY.items():
            values[column] += [s[field] for s in inside if field in s]
    out: dict[str, float | None] = {}
    for column, (_, how) in SUMMARY.items():
        found = [v for v in values[column] if not math.isnan(v)]
        out[column] = (max(found) if how == "max" else sum(found) / len(found)) if found else None
    out["telemetry_samples"] = len(values["cpu_util_pct"])
    return out
