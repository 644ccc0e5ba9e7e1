"""What a worker is asked to do: one expanded training run (RunSpec) or one collective benchmark launch
(CommSpec), and the spec file that carries either to the workers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from harness.base import nofollow
from harness.contract.axes import (
    Backend,
    Collective,
    Compile,
    Device,
    MemoryFormat,
    Precision,
    Rules,
    Size,
    Storage,
    Strategy,
    Workload,
)

SPEC_FORMAT = 2  # 2: strategy_options
ELEMENT_BYTES = 4  # a CommSpec's tensors are float32

# The dimensions that identify a configuration (repeats of it share them).
CONFIG_COLUMNS = ("scenario", "framework", "workload", "size", "nodes", "procs_per_node",
                  "world_size", "batch_per_worker", "global_batch", "strategy", "storage",
                  "launcher", "network", "precision", "memory_format", "compile", "device_requested", "warmup_steps", "measured_steps")


@dataclass(frozen=True)
class RunSpec:
    """Everything a worker needs to run one measured repeat of one configuration."""

    scenario: str
    framework: str
    workload: Workload
    size: Size
    workload_options: Mapping[str, int | float]
    nodes: int
    procs_per_node: int
    batch_per_worker: int
    strategy: Strategy
    storage: Storage
    repeat: int
    warmup_steps: int
    measured_steps: int
    timeout_s: float
    device: Device
    seed: int
    launcher: str = "torchrun"  # resolved (never "auto")
    launcher_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # the launcher's Options, as data
    network: str = "unlimited"  # link bandwidth cap between hosts (harness.base.network)
    precision: Precision = Precision.FP32
    memory_format: MemoryFormat = MemoryFormat.CONTIGUOUS
    compile: Compile = Compile.OFF
    strategy_options: Mapping[str, Any] = field(default_factory=dict)  # harness.experiment.strategies, resolved
    storage_options: Mapping[str, Any] = field(default_factory=dict)  # harness.storage.backends.StorageOptions, as data
    emulation: Mapping[str, Any] = field(default_factory=dict)  # device emulated: harness.machines.accelerators.resolve
    rules: Rules = Rules.ROSETTA  # mlperf_storage: MLPerf Storage's run rules; its seed is the scenario's + repeat

    @property
    def scenario_seed(self) -> int:
        """The configuration's seed: under mlperf_storage each run has its own (the scenario's + repeat)."""
        return (self.seed - self.repeat) % 2**32 if self.rules == Rules.MLPERF_STORAGE else self.seed

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def gpus(self) -> int:
        """The GPUs the run stands for: its processes, or on an emulated cluster where each process stands
        for ``gpus_per_rank`` GPUs of its host (docs/scaling.md), that many times them."""
        return self.world_size * int(self.emulation.get("gpus_per_rank", 1))

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step. A pipeline's ranks are its stages and tensor parallelism's ranks hold
        parts of every layer: in both, one batch of ``batch_per_worker`` passes through all ranks."""
        if self.strategy.kind.batch_through_all_ranks:
            return self.batch_per_worker
        return self.gpus * self.batch_per_worker

    def dimensions(self) -> dict[str, Any]:
        """The configuration as tidy columns (one per dimension), without the repeat index."""
        return {
            "scenario": self.scenario, "framework": self.framework, "workload": self.workload.value,
            "size": self.size.value, "nodes": self.nodes, "procs_per_node": self.procs_per_node,
            "world_size": self.gpus, "batch_per_worker": self.batch_per_worker,  # GPUs: reports scale by them
            "global_batch": self.global_batch, "strategy": self.strategy.value,
            "storage": self.storage.value, "launcher": self.launcher, "network": self.network,
            "precision": self.precision.value, "memory_format": self.memory_format.value,
            "compile": self.compile.value,
            "device_requested": self.device.value,
            "warmup_steps": self.warmup_steps, "measured_steps": self.measured_steps,
        }

    def config_id(self) -> str:
        """A stable short id of the configuration (options included), equal across repeats."""
        key = {**self.dimensions(), "workload_options": dict(self.workload_options), "seed": self.scenario_seed,
               "launcher_options": dict(self.launcher_options), "strategy_options": dict(self.strategy_options)}
        if self.storage_options:  # only when set, so the ids of synthetic-data runs stay as they were
            key["storage_options"] = dict(self.storage_options)
        if self.emulation:
            # a planted fault is the cluster's state, not the experiment's: a run with one is the same
            # configuration as without (compare names it as provenance, where.py where it struck)
            key["emulation"] = {k: v for k, v in self.emulation.items() if k != "fault"}
        if self.rules != Rules.ROSETTA:  # only when set, so the ids of earlier runs stay as they were
            key["rules"] = self.rules.value
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]

    def to_json(self) -> dict[str, Any]:
        return {k: (v.value if hasattr(v, "value") else (dict(v) if isinstance(v, Mapping) else v))
                for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunSpec":
        enums = {"workload": Workload, "size": Size, "strategy": Strategy, "storage": Storage,
                 "device": Device, "precision": Precision, "memory_format": MemoryFormat, "compile": Compile,
                 "rules": Rules}
        return cls(**{k: (enums[k](v) if k in enums else v) for k, v in data.items()})


@dataclass(frozen=True)
class CommSpec:
    """One launch of the comm worker: one backend, one world size, every collective and size.

    ``nodes`` and ``procs_per_node`` are what the launchers read (as of a training RunSpec).
    """

    backend: Backend
    device: str  # "cpu" | "cuda": where the tensors live
    nodes: int
    procs_per_node: int
    collectives: tuple[Collective, ...]
    sizes: tuple[int, ...]  # bytes
    iters: tuple[int, ...]  # timed iterations per size
    warmup_iters: int
    timeout_s: float
    launcher: str = "torchrun"
    launcher_options: Mapping[str, Any] = field(default_factory=dict)  # the launcher's Options, as data
    network: str = "unlimited"  # no cap (harness.base.network); the launchers read it
    root: int = 0  # the broadcast's source rank (the doctor sends from each host in turn)

    def config_id(self) -> str:
        """A stable short id of the launch (multi-node launchers use it as a rendezvous id)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:12]

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    def to_json(self) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc["backend"] = self.backend.value
        doc["collectives"] = [c.value for c in self.collectives]
        doc["sizes"], doc["iters"] = list(self.sizes), list(self.iters)
        doc["launcher_options"] = dict(self.launcher_options)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "CommSpec":
        return cls(backend=Backend(doc["backend"]), device=doc["device"], nodes=doc["nodes"],
                   procs_per_node=doc["procs_per_node"],
                   collectives=tuple(Collective(c) for c in doc["collectives"]), sizes=tuple(doc["sizes"]),
                   iters=tuple(doc["iters"]), warmup_iters=doc["warmup_iters"], timeout_s=doc["timeout_s"],
                   launcher=doc.get("launcher", "torchrun"), launcher_options=doc.get("launcher_options", {}),
                   network=doc.get("network", "unlimited"), root=doc.get("root", 0))


def write_spec_file(path: Path, spec: RunSpec, out_dir: Path) -> None:
    """Write the spec file a worker reads: the run and where to put its event records."""
    doc = {"format": SPEC_FORMAT, "run": spec.to_json(), "out_dir": str(out_dir)}
    nofollow.write(path, json.dumps(doc, indent=2))  # a link planted at spec.json is not written through


def read_spec_file(path: str | Path) -> tuple[RunSpec, Path]:
    """Read a spec file written by :func:`write_spec_file` (in a worker process)."""
    doc = json.loads(Path(path).read_text())
    if doc.get("format") != SPEC_FORMAT:
        raise ValueError(f"{path}: spec format {doc.get('format')!r}, this worker reads {SPEC_FORMAT}")
    if doc.get("kind") == "comm":  # a collective microbenchmark (rosetta comm), not a training run
        return CommSpec.from_json(doc["comm"]), Path(doc["out_dir"])  # type: ignore[return-value]
    return RunSpec.from_json(doc["run"]), Path(doc["out_dir"])


def write_comm_spec_file(path: Path, spec: CommSpec, out_dir: Path) -> None:
    """The spec file ``python -m harness.contract.worker`` reads (:func:`read_spec_file` knows ``kind = comm``)."""
    doc = {"format": SPEC_FORMAT, "kind": "comm", "comm": spec.to_json(), "out_dir": str(out_dir)}
    path.write_text(json.dumps(doc, indent=2))
