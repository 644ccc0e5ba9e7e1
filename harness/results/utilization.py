"""Achieved model FLOP/s and model FLOPs utilization (MFU) of a run, for its row.

achieved FLOP/s = training FLOPs per sample (:mod:`harness.machines.model_flops`: 3 x the forward's,
counted layer by layer as the equivalence contract counts them) x the run's samples/s (all ranks).
MFU = achieved FLOP/s / (devices x one device's dense peak at the run's precision). A GPU's peak comes
from the table kept as data with sources (:mod:`harness.machines.peaks`), one device per rank. A CPU's
is measured on this machine: the best FLOP/s of a float32 matrix product, in NumPy's BLAS and in
PyTorch's (where installed, in a process of its own: the harness imports no framework), the faster of the
two, every core they may use. A CPU's peak is what its best library reaches: on this project's 2-core
machine NumPy's OpenBLAS made 0.033 TFLOP/s and PyTorch's 0.256, and a peak from NumPy alone put the
quickstart's MFU near 300%. Measured once per CPU model, core count, thread count and method, and cached
(``~/.cache/rosetta/cpu-peak.json``), labelled "measured" in the row; one CPU device per node. Emulated
accelerators and precisions a device has no peak for get no MFU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from harness.contract.axes import Precision
from harness.contract.spec import RunSpec
from harness.contract.workloads import WORKLOADS
from harness.machines.model_flops import training_flops_per_sample
from harness.machines.peaks import Peak, device_peak
from harness.results.provenance import cpu_model

GEMM_SIZE = 2048  # n of the n x n x n float32 product: 17 GFLOP, large enough for a BLAS's best
GEMM_REPEATS = 7  # the best of these is the peak (a shared machine's other work only slows some)
CPU_PEAK_FILE = "cpu-peak.json"
METHOD = f"float32 GEMM {GEMM_SIZE}x{GEMM_SIZE}, best of {GEMM_REPEATS}, the faster of NumPy's BLAS and PyTorch's"
# the same product in PyTorch, run as ``python -c TORCH_GEMM SIZE REPEATS``; prints TFLOP/s
TORCH_GEMM = """
import sys, time, torch
n, repeats = int(sys.argv[1]), int(sys.argv[2])
a, b = torch.randn(n, n), torch.randn(n, n)
a @ b
best = float("inf")
for _ in range(repeats):
    start = time.perf_counter()
    a @ b
    best = min(best, time.perf_counter() - start)
print(2 * n**3 / best / 1e12)
"""


def cache_path() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rosetta" / CPU_PEAK_FILE


def cpu_threads() -> int:
    """The cores this process may run on (NumPy's BLAS uses as many threads by default)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def measure_gemm_tflops(size: int = GEMM_SIZE, repeats: int = GEMM_REPEATS) -> float:
    """The best TFLOP/s of ``repeats`` float32 products of two ``size`` x ``size`` matrices (2 n^3 FLOPs), in
    NumPy's BLAS or PyTorch's, whichever is faster."""
    return max(numpy_gemm_tflops(size, repeats), torch_gemm_tflops(size, repeats) or 0.0)


def torch_gemm_tflops(size: int, repeats: int) -> float | None:
    """The product's best TFLOP/s in PyTorch, in a process of its own; None without torch, or if it failed."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        done = subprocess.run([sys.executable, "-c", TORCH_GEMM, str(size), str(repeats)], capture_output=True,
                              text=True, timeout=300)
        return float(done.stdout.split()[-1]) if done.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        return None


def numpy_gemm_tflops(size: int, repeats: int) -> float:
    """The product's best TFLOP/s in NumPy."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    a @ b  # the BLAS's threads start and its buffers are allocated outside the timing
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e12


def cpu_peak(measure: Callable[[], float] = measure_gemm_tflops, path: Path | None = None) -> Peak:
    """This machine's measured float32 GEMM peak, from the cache or measured now (a few seconds) and kept."""
    path = path or cache_path()
    key = f"{cpu_model()} | {os.cpu_count()} cores | {cpu_threads()} threads"
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    entry = cached.get(key)
    if not entry or entry.get("method") != METHOD:  # not measured here yet, or measured another way
        entry = {"tflops": measure(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "method": METHOD}
        cached[key] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cached, indent=2))
        os.replace(tmp, path)
    return Peak(float(entry["tflops"]), f"measured: {entry['method']} on {key} ({entry['measured_at']}, {path})")


def run_peak(device: str | None, gpu_model: str | None, precision: Precision,
             cpu: Callable[[], Peak] = cpu_peak) -> Peak | None:
    """One device's peak for a run on ``device`` (cpu | cuda), or None (emulated, or no table entry)."""
    if device == "cuda":
        return device_peak(gpu_model, precision)
    if device == "cpu" and precision == Precision.FP32:
        return cpu()
    return None


def devices_of(spec: RunSpec, device: str | None) -> int:
    """The devices a run's peak counts: one GPU per rank; one CPU (every core of a machine) per node."""
    return spec.world_size if device == "cuda" else spec.nodes


def utilization_fields(spec: RunSpec, facts: Mapping[str, Any], cpu: Callable[[], Peak] = cpu_peak) -> dict[str, Any]:
    """The row's FLOPs columns from its spec and measured facts (``throughput``, ``device``, ``gpu_model``):
    training FLOPs per sample always; achieved TFLOP/s per device, the peak and MFU where there is a peak."""
    info = WORKLOADS[spec.workload]
    per_sample = training_flops_per_sample(spec.workload, spec.workload_options, info.samples_per_item(spec.workload_options))
    fields: dict[str, Any] = {"model_flops_per_sample": per_sample}
    throughput, device = facts.get("throughput"), facts.get("device")
    if throughput is None or device == "emulated":
        return fields
    devices = devices_of(spec, device)
    fields["achieved_tflops"] = per_sample * throughput / devices / 1e12
    peak = run_peak(device, facts.get("gpu_model"), spec.precision, cpu)
    if peak is not None:
        fields.update(peak_tflops=peak.tflops, peak_source=peak.source, peak_devices=devices,
                      mfu=fields["achieved_tflops"] / peak.tflops)
    return fields
