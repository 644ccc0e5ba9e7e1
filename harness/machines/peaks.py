"""Accelerators' dense peak FLOP/s per precision, kept as data with their sources (``peaks.toml`` beside
this module): the denominator of model FLOPs utilization (MFU, :mod:`harness.results.utilization`).

The table holds vendors' *dense* figures only (a datasheet's sparse figure is twice the dense one and
must not be used: see the file's head). A CPU has no entry: its peak is measured on the machine
(:mod:`harness.results.utilization`).
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from harness.contract.axes import Precision

PEAKS_FILE = Path(__file__).with_name("peaks.toml")
PRECISION_KEYS = {Precision.FP32: "fp32", Precision.TF32: "tf32", Precision.AMP_FP16: "fp16",
                  Precision.AMP_BF16: "bf16"}
PEAK_KEYS = frozenset(PRECISION_KEYS.values())
DEVICE_KEYS = frozenset({"name", "names", "source"}) | PEAK_KEYS


@dataclass(frozen=True)
class DevicePeaks:
    """One accelerator's dense peaks (TFLOP/s, 1e12 FLOP/s) by precision key, and where they come from."""

    name: str
    names: tuple[str, ...]  # case-insensitive substrings of the reported device name
    tflops: Mapping[str, float]
    source: str

    def matches(self, device_name: str) -> bool:
        return any(n.lower() in device_name.lower() for n in self.names)


@dataclass(frozen=True)
class Peak:
    """The peak one device reaches at one precision: TFLOP/s and its source, in words."""

    tflops: float
    source: str


def parse(text: str, where: str) -> tuple[DevicePeaks, ...]:
    """The table's devices; a malformed entry is a ValueError naming it (the file ships with the harness)."""
    devices = []
    for index, entry in enumerate(tomllib.loads(text).get("device", [])):
        label = f"{where}: device {entry.get('name', index)!r}"
        unknown = set(entry) - DEVICE_KEYS
        if unknown or not {"name", "names", "source"} <= set(entry):
            raise ValueError(f"{label}: keys {sorted(unknown)} unknown or name/names/source missing")
        peaks = {k: float(v) for k, v in entry.items() if k in PEAK_KEYS}
        if not peaks or min(peaks.values()) <= 0:
            raise ValueError(f"{label}: needs at least one positive peak of {sorted(PEAK_KEYS)}")
        devices.append(DevicePeaks(entry["name"], tuple(entry["names"]), peaks, entry["source"]))
    return tuple(devices)


@functools.lru_cache(maxsize=1)
def table(path: Path = PEAKS_FILE) -> tuple[DevicePeaks, ...]:
    return parse(path.read_text(), str(path))


def device_peak(device_name: str | None, precision: Precision,
                devices: tuple[DevicePeaks, ...] | None = None) -> Peak | None:
    """The dense peak of the device called ``device_name`` at ``precision``, or None where the table has
    no such device or that device no such precision (V100 and bf16)."""
    if not device_name:
        return None
    entry = next((d for d in (devices if devices is not None else table()) if d.matches(device_name)), None)
    key = PRECISION_KEYS[precision]
    if entry is None or key not in entry.tflops:
        return None
    return Peak(entry.tflops[key], f"{entry.name} dense {key}: {entry.source}")
