"""Published reference figures as data (``results/reference/*.toml``, format 1).

Each file: where the numbers come from, the configuration they were measured in,
their unit, caveats, the series (worker counts and throughput, speed-up or
efficiency as the source gives them), and optionally the scenario that matches
the reference at this machine's scale (``[reproduce]``). See
``results/reference/README.md``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import frameworks
from harness.base import config
from harness.base.config import Where
from harness.base.errors import UserError
from harness.contract.axes import CommAlgorithm, Precision, Size, Storage, Strategy, Workload
from harness.contract.workloads import DECLARATIONS
from harness.results.provenance import REPO_ROOT

REFERENCE_FORMAT = 1
REFERENCE_DIR = REPO_ROOT / "results" / "reference"


@dataclass(frozen=True)
class Configuration:
    """The published setup, in the source's words."""

    hardware: str
    model: str
    batch: str
    precision: str
    data: str
    interconnect: str
    software: str


@dataclass(frozen=True)
class Series:
    """One published curve: values at GPU (worker) counts. Efficiencies are fractions."""

    label: str
    gpus: tuple[int, ...] = field(metadata={"min": 1})
    throughput: tuple[float, ...] = ()  # in the reference's unit
    speedup: tuple[float, ...] = ()  # over the first point, as the source states it
    efficiency: tuple[float, ...] = ()  # as the source states it

    def efficiencies(self) -> list[float]:
        """Scaling efficiency at each point: as stated, else from throughput, else from speed-up."""
        if self.efficiency:
            return list(self.efficiency)
        n0 = self.gpus[0]
        if self.throughput:
            return [t / (n / n0 * self.throughput[0]) for t, n in zip(self.throughput, self.gpus)]
        if self.speedup:
            return [s / (n / n0) for s, n in zip(self.speedup, self.gpus)]
        return [math.nan] * len(self.gpus)


@dataclass(frozen=True)
class Fact:
    """A single published number that is not a scaling curve (e.g. a checkpoint time)."""

    label: str
    value: float
    unit: str


@dataclass(frozen=True)
class Reproduce:
    """How (and whether) this machine reproduces the reference; ``scenario`` is a scenario
    document (settings, matrix, ...) or empty when it cannot run here."""

    what_transfers: str
    not_reproduced: str
    scenario: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Requirements:
    """What a reproduction needs, as names the registries know (``[requires]``): every framework
    listed, and for each strategy, storage, workload and device some listed framework declaring it
    (any framework when none is listed); launchers by name. ``hardware`` names what no registry
    can supply (GPU models, a core count); ``pending`` the issue that is adding a missing part."""

    frameworks: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})
    strategies: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})
    storage: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})
    workloads: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})
    devices: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})
    launchers: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})
    hardware: str = ""
    pending: str = ""


@dataclass(frozen=True)
class PublishedRun:
    """How one published series was run, in this harness's terms (``[[published.runs]]``)."""

    series: str  # the label of a [[series]]
    framework: str
    batch_per_worker: int = field(metadata={"min": 1})
    precision: str = "fp32"
    inter_link: str = ""  # overrides the configuration's (a series over another network)
    intra_link: str = ""  # overrides the configuration's (a series whose stack moved the bytes within a node otherwise)
    strategy: str = "allreduce"  # how the series distributed training (fsdp: sharded data parallelism)
    accelerator: str = ""  # overrides [published] accelerator (a series of another GPU model, or software's step)
    workload: str = ""  # overrides [published] workload (a series of another model: Horovod's tables have three)


@dataclass(frozen=True)
class Published:
    """The published configuration as data (``[published]``): what ``--at published`` runs at every
    point of the series (GPUs -> nodes of ``gpus_per_node``) and what the scaling model predicts
    from. Links are names in harness/machines/interconnects.toml; ``inter_link`` "" = one node only."""

    workload: str
    gpus_per_node: int = field(metadata={"min": 1})
    parameters: int = field(metadata={"min": 1})  # of the published model: the gradient the model sends
    intra_link: str
    size: str = "full"
    storage: str = "synthetic"
    inter_link: str = ""
    algorithm: str = "hierarchical"  # how the source's library reduces (NCCL: within, then across nodes)
    accelerator: str = ""  # the emulated accelerator (harness/machines/accelerators.toml) for --at emulated
    # what the source's runs read, in its words, where that was not synthetic data: the scaling model and
    # --at emulated have no input pipeline, so a point the source's input bound reads high in both
    source_input: str = ""
    runs: tuple[PublishedRun, ...] = ()  # from [[published.runs]]

    def workload_of(self, run: PublishedRun) -> str:
        """The workload ``run``'s series trained: its own, or the configuration's."""
        return run.workload or self.workload

    def parameters_of(self, run: PublishedRun) -> int:
        """The parameters of ``run``'s model (the gradient it sends): the configuration's for its workload, the
        published count of the series' own workload's model (its declaration's) for another."""
        if not run.workload or run.workload == self.workload:
            return self.parameters
        return DECLARATIONS[run.workload].published_parameters or self.parameters


@dataclass(frozen=True)
class Reference:
    id: str
    title: str
    source: str
    read_from: str  # chart | table | text
    accuracy: str
    unit: str
    workload: str  # the closest workload here ("" if none)
    configuration: Configuration
    caveats: tuple[str, ...]
    series: tuple[Series, ...]
    facts: tuple[Fact, ...]
    reproduce: Reproduce
    url: str = ""
    path: str = ""
    # pairs of series labels (numerator, denominator) whose efficiency ratio is meaningful; empty:
    # every series against the first
    ratios: tuple[tuple[str, str], ...] = ()
    requires: Requirements = Requirements()
    published: Published | None = None


_TOP = ["format", "id", "title", "source", "url", "read_from", "accuracy", "unit", "workload", "caveats",
        "configuration", "series", "facts", "ratios", "reproduce", "requires", "published"]
_REPRODUCE = ["what_transfers", "not_reproduced", "settings", "matrix", "include", "exclude", "workload_options",
              "strategy_options", "launcher_options"]
_READ_FROM = ("chart", "table", "text")


def load(path: Path) -> Reference:
    """Read and validate one reference file; mistakes are one-line :class:`UserError` s."""
    doc = config.read_toml(path)
    where = Where(str(path))
    config.check_keys(doc, _TOP, where)
    if doc.get("format") != REFERENCE_FORMAT:
        raise where.error("format", f"this harness reads reference format {REFERENCE_FORMAT}, got "
                                    f"{doc.get('format')!r}")
    text = {k: config.convert(doc.get(k, ""), str, where, k) for k in
            ("id", "title", "source", "url", "accuracy", "unit", "workload")}
    for key in ("id", "title", "source", "unit"):
        if not text[key]:
            raise where.error(key, "missing (required)")
    read_from = config.convert(doc.get("read_from", ""), str, where, "read_from", {"choices": _READ_FROM})
    caveats = tuple(config.convert(c, str, where, "caveats") for c in doc.get("caveats", []))
    configuration = config.build(Configuration, config.expect_table(doc.get("configuration", {}), where,
                                                                   "configuration"), where.sub("configuration"))
    series = []
    for i, raw in enumerate(doc.get("series", [])):
        sw = Where(str(path), f"series][{i}")
        raw = config.expect_table(raw, where, f"series[{i}]")
        config.check_keys(raw, ["label", "gpus", "throughput", "speedup", "efficiency"], sw)
        if "label" not in raw or "gpus" not in raw:
            raise sw.error("gpus" if "label" in raw else "label", "missing (required)")
        s = Series(label=config.convert(raw["label"], str, sw, "label"),
                   gpus=config.convert(raw["gpus"], tuple[int, ...], sw, "gpus", {"min": 1}),
                   **{k: _numbers(raw[k], sw, k) for k in ("throughput", "speedup", "efficiency") if k in raw})
        for name in ("throughput", "speedup", "efficiency"):
            values = getattr(s, name)
            if values and len(values) != len(s.gpus):
                raise sw.error(name, f"has {len(values)} values for {len(s.gpus)} gpus")
        if not (s.throughput or s.speedup or s.efficiency):
            raise sw.error("throughput", "a series needs throughput, speedup or efficiency")
        series.append(s)
    facts = tuple(config.build(Fact, config.expect_table(raw, where, f"facts[{i}]"), Where(str(path), f"facts][{i}"))
                  for i, raw in enumerate(doc.get("facts", [])))
    rw = where.sub("reproduce")
    raw_reproduce = dict(config.expect_table(doc.get("reproduce", {}), where, "reproduce"))
    config.check_keys(raw_reproduce, _REPRODUCE, rw)
    scenario = {k: v for k, v in raw_reproduce.items() if k not in ("what_transfers", "not_reproduced")}
    reproduce = Reproduce(what_transfers=config.convert(raw_reproduce.get("what_transfers", ""), str, rw,
                                                        "what_transfers"),
                          not_reproduced=config.convert(raw_reproduce.get("not_reproduced", ""), str, rw,
                                                        "not_reproduced"),
                          scenario=scenario)
    labels = [s.label for s in series]
    ratios = []
    for i, pair in enumerate(doc.get("ratios", [])):
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(x, str) and x in labels for x in pair)):
            raise where.error("ratios", f"entry {i} must be [numerator label, denominator label] of series; "
                                        f"labels: {', '.join(labels)}")
        ratios.append(tuple(pair))
    requires = config.build(Requirements, config.expect_table(doc.get("requires", {}), where, "requires"),
                            where.sub("requires"))
    published = _published(doc, where, labels) if "published" in doc else None
    return Reference(requires=requires, published=published, ratios=tuple(ratios), configuration=configuration, caveats=caveats, series=tuple(series), facts=facts,
                     reproduce=reproduce, read_from=read_from, path=str(path), **text)


def _published(doc: Mapping[str, Any], where: Where, labels: list[str]) -> Published:
    raw = dict(config.expect_table(doc["published"], where, "published"))
    pw = where.sub("published")
    runs = raw.pop("runs", [])
    if not isinstance(runs, list) or not runs:
        raise pw.error("runs", "missing (required): one [[published.runs]] per series to run")
    built = []
    for i, entry in enumerate(runs):
        run = config.build(PublishedRun, config.expect_table(entry, pw, f"runs[{i}]"),
                           Where(where.file, f"published.runs][{i}"),
                           framework={"choices": frameworks.names()},
                           precision={"choices": [p.value for p in Precision]},
                           strategy={"choices": [s.value for s in Strategy]},
                           workload={"choices": [w.value for w in Workload]})
        if run.series not in labels:
            raise Where(where.file, f"published.runs][{i}").error(
                "series", f"{run.series!r} is no series label; labels: {', '.join(labels)}")
        built.append(run)
    choices = {"workload": {"choices": [w.value for w in Workload]}, "size": {"choices": [z.value for z in Size]},
               "storage": {"choices": [x.value for x in Storage]},
               "algorithm": {"choices": [a.value for a in CommAlgorithm]}}
    return dataclasses.replace(config.build(Published, raw, pw, **choices), runs=tuple(built))


def _numbers(value: Any, where: Where, key: str) -> tuple[float, ...]:
    """A list of positive numbers (repeats allowed, unlike a scenario axis)."""
    if not isinstance(value, list) or not value:
        raise where.error(key, f"must be a non-empty array of numbers, got {config.type_name(value)}")
    return tuple(config.convert(v, float, where, key, {"min": 0}) for v in value)


def all_references(directory: Path = REFERENCE_DIR) -> dict[str, Reference]:
    refs = {}
    for path in sorted(Path(directory).glob("*.toml")):
        ref = load(path)
        if ref.id != path.stem:
            raise UserError(f"{path}: id {ref.id!r} must equal the file name {path.stem!r}")
        refs[ref.id] = ref
    return refs


def get(name: str, directory: Path = REFERENCE_DIR) -> Reference:
    refs = all_references(directory)
    if name not in refs:
        raise UserError(f"no reference {name!r}; known: {', '.join(refs)}")
    return refs[name]
