"""The interconnects and single-GPU baselines of ``interconnects.toml`` (beside this module), read and
checked in one place: the emulated cluster shapes its links from them (harness.machines.emulated_cluster),
the scaling model predicts over them (harness.scaling). No deep-learning import here."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from harness.base import config

INTERCONNECTS_FILE = Path(__file__).with_name("interconnects.toml")
FORMAT = 1


@dataclass(frozen=True)
class LinkPreset:
    """One kind of link: effective bandwidth each direction and the cost of one message step."""

    title: str
    bandwidth_GBps: float = field(metadata={"min": 1e-6})  # effective, each direction (1e9 B/s)
    latency_us: float = field(metadata={"min": 0})  # per ring step, software included
    source: str

    @property
    def bandwidth_Bps(self) -> float:
        return self.bandwidth_GBps * 1e9

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6


@dataclass(frozen=True)
class Baseline:
    """One GPU's published throughput on a workload (samples/s), the batch it ran and the model's size."""

    title: str
    workload: str
    throughput: float = field(metadata={"min": 1e-9})  # samples/s on one GPU
    batch_per_worker: int = field(metadata={"min": 1})
    parameters: int = field(metadata={"min": 1})
    source: str

    @property
    def step_time_s(self) -> float:
        return self.batch_per_worker / self.throughput


@dataclass(frozen=True)
class Presets:
    links: Mapping[str, LinkPreset]
    baselines: Mapping[str, Baseline]


def load_presets(path: Path = INTERCONNECTS_FILE) -> Presets:
    """The file's presets, checked (unknown keys, a wrong format version: one-line errors naming where)."""
    return _load(Path(path), Path(path).stat().st_mtime_ns)


@lru_cache(maxsize=8)
def _load(path: Path, _mtime_ns: int) -> Presets:  # read once per version of the file
    doc = config.read_toml(path)
    where = config.Where(str(path))
    config.check_keys(doc, ["format", "link", "baseline"], where)
    if doc.get("format") != FORMAT:
        raise where.error("format", f"must be {FORMAT}, got {doc.get('format')!r}")
    links = {name: config.build(LinkPreset, config.expect_table(t, where.sub("link"), name), where.sub(f"link.{name}"))
             for name, t in config.expect_table(doc.get("link", {}), where, "link").items()}
    baselines = {name: config.build(Baseline, config.expect_table(t, where.sub("baseline"), name),
                                    where.sub(f"baseline.{name}"))
                 for name, t in config.expect_table(doc.get("baseline", {}), where, "baseline").items()}
    return Presets(links, baselines)
