"""Scenario files: a matrix of runs declared in TOML, validated before anything runs.

Layout of a scenario file::

    name = "quickstart"            # optional, defaults to the file's stem
    description = "..."            # optional
    [settings]                     # applies to every run (RunSettings)
    [matrix]                       # axes; each a value or an array (Matrix)
    [[include]]                    # extra combinations (axis = value)
    [[exclude]]                    # combinations to drop (axis = value, all must match)
    [workload_options.<workload>]  # per-workload option overrides
    [strategy_options.<strategy>]  # per-strategy options (harness.experiment.strategies)
    [launcher_options.<launcher>]  # a launcher's settings (hosts, partition, image, ...)
    [emulation]                    # device = "emulated": the accelerator (harness.machines.accelerators)
    [faults]                       # a fault planted on the emulated cluster (harness.machines.faults)
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import frameworks
from harness import launchers
from harness.base import config, network
from harness.base.config import Where
from harness.base.errors import UserError
from harness.contract.axes import (
    Compile,
    Device,
    MemoryFormat,
    Precision,
    Rules,
    Size,
    Storage,
    Strategy,
    Workload,
    reductions,
)
from harness.contract.workloads import WORKLOADS
from harness.experiment import strategies
from harness.machines import accelerators, faults
from harness.machines.accelerators import EmulationOptions
from harness.storage import backends as storage

SCENARIO_FORMAT = 1
MAX_RULES = 100_000  # entries of [[include]] or of [[exclude]]: beyond it, a generated mistake
MAX_RUNS = 10_000  # runs a scenario may expand to (axes' product x repeats): beyond it, a mistake, not a plan
MAX_PROCS_PER_NODE = 256  # ranks on one node: the most cores or GPUs a node has
# Bounds of workload options by type (counts and sizes; rates and targets), tighter ones by name.
WORKLOAD_OPTION_BOUNDS = {int: {"min": 1, "max": 1_000_000}, float: {"min": 0, "max": 1_000.0}}
WORKLOAD_OPTION_BOUNDS_BY_NAME = {"target_accuracy": {"min": 0, "max": 1.0}, "momentum": {"min": 0, "max": 1.0}}


@dataclass(frozen=True)
class RunSettings:
    """Settings shared by every run of a scenario. Times are in seconds."""

    warmup_steps: int = field(default=5, metadata={"min": 0, "max": 100_000})
    measured_steps: int = field(default=20, metadata={"min": 1, "max": 1_000_000})
    repeats: int = field(default=3, metadata={"min": 1, "max": 1000})
    timeout_s: float = field(default=900.0, metadata={"min": 1, "max": 7 * 24 * 3600})  # a week
    device: Device = Device.AUTO
    seed: int = field(default=0, metadata={"min": 0, "max": 2**32 - 1})  # what every RNG takes
    rules: Rules = Rules.ROSETTA  # mlperf_storage: MLPerf Storage's run rules (docs/storage.md), device emulated


@dataclass(frozen=True)
class Matrix:
    """The axes of a scenario; the runs are their product, less exclusions, plus inclusions."""

    framework: tuple[str, ...]
    workload: tuple[Workload, ...]
    size: tuple[Size, ...] = (Size.SMALL,)
    nodes: tuple[int, ...] = field(default=(1,), metadata={"min": 1, "max": 4096})
    procs_per_node: tuple[int, ...] = field(default=(1,), metadata={"min": 1, "max": MAX_PROCS_PER_NODE})
    batch_per_worker: tuple[int, ...] = field(default=(32,), metadata={"min": 1, "max": 65536})
    strategy: tuple[Strategy, ...] = (Strategy.ALLREDUCE,)
    storage: tuple[Storage, ...] = (Storage.SYNTHETIC,)
    launcher: tuple[str, ...] = (launchers.AUTO,)  # "auto": the framework's default
    network: tuple[str, ...] = (network.UNLIMITED,)  # link cap between hosts, e.g. "1gbit"
    precision: tuple[Precision, ...] = (Precision.FP32,)
    memory_format: tuple[MemoryFormat, ...] = (MemoryFormat.CONTIGUOUS,)
    compile: tuple[Compile, ...] = (Compile.OFF,)


AXES = [f.name for f in dataclasses.fields(Matrix)]


@dataclass(frozen=True)
class Scenario:
    name: str
    path: str
    settings: RunSettings
    matrix: Matrix
    description: str = ""
    include: tuple[Mapping[str, Any], ...] = ()
    exclude: tuple[Mapping[str, Any], ...] = ()
    workload_options: Mapping[Workload, Mapping[str, int | float]] = field(default_factory=dict)
    launcher_options: Mapping[str, Any] = field(default_factory=dict)  # launcher name -> its Options
    strategy_options: Mapping[Strategy, Any] = field(default_factory=dict)  # frozen options per strategy
    storage_options: Mapping[Storage, Any] = field(default_factory=dict)  # harness.storage.backends.StorageOptions
    emulation: EmulationOptions | None = None  # device emulated: which accelerator, how its steps are spent
    faults: faults.FaultOptions | None = None  # the emulated cluster: a fault planted (harness.machines.faults)


TOP_LEVEL_KEYS = ["format", "name", "description", "settings", "matrix", "include", "exclude",
                  "workload_options", "launcher_options", "strategy_options", "storage_options", "emulation", "faults"]


def load(path: str | Path) -> Scenario:
    """Read and validate a scenario file; any mistake is a one-line :class:`UserError`."""
    path = Path(path)
    return parse(config.read_toml(path), str(path), default_name=path.stem)


def parse(doc: Mapping[str, Any], file: str, default_name: str = "scenario") -> Scenario:
    """Validate a parsed TOML document (see :func:`load`)."""
    where = Where(file)
    config.check_keys(doc, TOP_LEVEL_KEYS, where)
    fmt = doc.get("format", SCENARIO_FORMAT)
    if isinstance(fmt, bool) or fmt != SCENARIO_FORMAT:  # true == 1 in Python, not in TOML
        raise where.error("format", f"this harness reads scenario format {SCENARIO_FORMAT}, got {fmt!r}")
    # a name heads every table and labels every row; a description is a paragraph, not a file
    name = config.convert(doc.get("name", default_name), str, where, "name", {"max_length": 128})
    description = config.convert(doc.get("description", ""), str, where, "description", {"max_length": 2000})

    settings_where = where.sub("settings")
    settings = config.build(RunSettings, config.expect_table(doc.get("settings", {}), where, "settings"),
                            settings_where)
    if settings.warmup_steps >= settings.measured_steps:
        raise settings_where.error(
            "warmup_steps", f"must be < measured_steps ({settings.measured_steps}), got {settings.warmup_steps}")

    if settings.rules == Rules.MLPERF_STORAGE and settings.device != Device.EMULATED:
        raise settings_where.error("rules", 'mlperf_storage needs device = "emulated" (the rules measure '
                                            'emulated accelerators)')

    if "matrix" not in doc:
        raise where.error("matrix", "missing (required): the axes to run, e.g. framework and workload")
    matrix = config.build(Matrix, config.expect_table(doc["matrix"], where, "matrix"), where.sub("matrix"),
                          **_registry_choices())
    _check_networks(matrix.network, where.sub("matrix"))
    _check_run_count(matrix, doc.get("include", []), settings, where)
    include = tuple(_complete_include(combo, matrix, Where(file, f"include][{i}"))
                    for i, combo in enumerate(_rules(doc.get("include", []), where, "include")))
    exclude = _rules(doc.get("exclude", []), where, "exclude")
    options = _workload_options(doc.get("workload_options", {}), where.sub("workload_options"))
    launcher_options = _launcher_options(doc.get("launcher_options", {}), where.sub("launcher_options"))
    strategy_options = strategies.parse_options(doc.get("strategy_options", {}), where.sub("strategy_options"))
    storage_options = storage.parse_options(doc.get("storage_options", {}), matrix.storage, where.sub("storage_options"))
    emulation = _emulation(doc, settings, where)
    scenario = Scenario(name=name, path=file, settings=settings, matrix=matrix, description=description,
                        include=include, exclude=exclude, workload_options=options,
                        launcher_options=launcher_options, strategy_options=strategy_options,
                        storage_options=storage_options, emulation=emulation,
                        faults=faults.parse(doc.get("faults"), emulation, where))
    _check_sizes(scenario)
    _check_profiles(scenario, where)
    _check_reductions(scenario, where)
    return scenario


def _check_run_count(matrix: Matrix, include: Any, settings: RunSettings, where: Where) -> None:
    """Refuse, before anything expands, a matrix of more than MAX_RUNS runs (the message gives the count)."""
    sizes = [len(getattr(matrix, axis)) for axis in AXES]
    configs = 1
    for n in sizes:
        configs *= n
    extra = len(include) if isinstance(include, list) else 0
    runs = (configs + extra) * settings.repeats
    if runs > MAX_RUNS:
        shape = " x ".join(f"{n} {axis}" for n, axis in zip(sizes, AXES) if n > 1) or "1 configuration"
        raise where.error("matrix", f"expands to {runs:,} runs (({shape}{f' + {extra} included' if extra else ''})"
                                    f" x {settings.repeats} repeats); at most {MAX_RUNS:,} are allowed: split the "
                                    f"scenario or narrow its axes")


def _check_profiles(scenario: Scenario, where: Where) -> None:
    """Every run of an emulated scenario has an accelerator profile (or a compute time given outright), and an
    emulated host loader only synthetic data."""
    if scenario.emulation is None:
        return
    for combo in combinations(scenario):
        try:
            accelerators.resolve(scenario.emulation, combo["workload"], combo["batch_per_worker"], combo["precision"],
                                combo["size"], combo["nodes"], combo["procs_per_node"])
        except UserError as exc:
            raise where.sub("emulation").error("accelerator", str(exc).removeprefix("emulation: ")) from None
        if scenario.emulation.input_workers and combo["storage"] != Storage.SYNTHETIC:
            raise where.sub("emulation").error("input_workers", f"the emulated host's loader stands for a real one: "
                                                                f"with storage {combo['storage'].value} the ranks "
                                                                f"read through their real loader (synthetic only)")


def _check_reductions(scenario: Scenario, where: Where) -> None:
    """An emulated cluster made smaller (gpus_per_rank, gradient_scale: docs/scaling.md) only where each run's
    framework declares it (FrameworkInfo.emulated_reductions) and with its strategies; a process standing for
    several GPUs makes no real batches (synthetic data) and carries no fault (faults are placed by GPU)."""
    if scenario.emulation is None or not reductions(scenario.emulation):
        return
    here = where.sub("emulation")
    for combo in combinations(scenario):
        reason = frameworks.get(combo["framework"]).unsupported_reduction(combo["strategy"], scenario.emulation)
        if reason:
            raise here.error(reductions(scenario.emulation)[0].value, reason)
    if scenario.emulation.gpus_per_rank > 1:
        if any(c["storage"] != Storage.SYNTHETIC for c in combinations(scenario)):
            raise here.error("gpus_per_rank", "a process standing for several GPUs reads no real batches: "
                                              "storage synthetic only")
        if scenario.faults is not None:
            raise here.error("gpus_per_rank", "a [faults] table places its fault on one GPU: gpus_per_rank = 1")


def _emulation(doc: Mapping[str, Any], settings: RunSettings, where: Where) -> EmulationOptions | None:
    """``[emulation]``: required with device emulated, refused without it."""
    emulated = settings.device == Device.EMULATED
    if "emulation" not in doc:
        if emulated:
            raise where.error("emulation", 'missing: device "emulated" needs an [emulation] table '
                                           '(accelerator = "h100", or compute_s)')
        return None
    if not emulated:
        raise where.error("emulation", 'only with device = "emulated" in [settings]')
    options = config.build(EmulationOptions, config.expect_table(doc["emulation"], where, "emulation"),
                           where.sub("emulation"))
    if not options.accelerator and not options.compute_s:
        raise where.sub("emulation").error("accelerator", "missing: a profile name (harness/machines/accelerators.toml) "
                                                          "or compute_s")
    if bool(options.input_workers) != bool(options.input_rate):
        missing = "input_rate" if options.input_workers else "input_workers"
        raise where.sub("emulation").error(missing, "missing: the emulated host's loader needs input_workers (per GPU) "
                                                    "and input_rate (samples/s a worker)")
    return options


def _rules(value: Any, where: Where, key: str) -> tuple[dict[str, Any], ...]:
    """``[[include]]`` / ``[[exclude]]`` entries: axis = value, each value checked as its axis (at most
    MAX_RULES of them; each axis's type and bounds looked up once, not per entry)."""
    if not isinstance(value, list):
        raise where.error(key, f"must be an array of tables ([[{key}]]), got {config.type_name(value)}")
    if len(value) > MAX_RULES:
        raise where.error(key, f"{len(value):,} entries; at most {MAX_RULES:,} are allowed")
    fields = {f.name: f for f in dataclasses.fields(Matrix)}
    choices = _registry_choices()
    axes = {axis: (config.field_type(Matrix, axis).__args__[0], {**fields[axis].metadata, **choices.get(axis, {})})
            for axis in AXES}
    rules = []
    for i, entry in enumerate(value):
        entry_where = Where(where.file, f"{key}][{i}")
        entry = config.expect_table(entry, where, f"{key}[{i}]")
        if not entry:
            raise entry_where.error("(entry)", "is empty; name at least one axis")
        config.check_keys(entry, AXES, entry_where)
        rule = {}
        for axis, raw in entry.items():
            item_tp, meta = axes[axis]
            rule[axis] = config.convert(raw, item_tp, entry_where, axis, meta)
            if axis == "network":
                _check_networks((rule[axis],), entry_where)
        rules.append(rule)
    return tuple(rules)


def _registry_choices() -> dict[str, dict[str, list[str]]]:
    """Axes whose allowed values come from a registry, as field metadata."""
    return {"framework": {"choices": frameworks.names()},
            "launcher": {"choices": [launchers.AUTO, *launchers.names()]}}


def _check_networks(values: tuple[str, ...], where: Where) -> None:
    for value in values:
        try:
            network.bits_per_s(value)
        except ValueError as exc:
            raise where.error("network", str(exc)) from None


def _launcher_options(value: Any, where: Where) -> dict[str, Any]:
    """``[launcher_options.<name>]`` tables, each built into that launcher's ``Options``."""
    def options_of(name: str) -> tuple[str, type]:
        config.convert(name, str, where, name, {"choices": launchers.names()})
        return name, launchers.module(name).Options
    result = config.build_tables(value, where, "launcher_options", options_of)
    for name, options in result.items():
        _check_one_line(options, where.sub(name))
    return result


def _check_one_line(options: Any, where: Where) -> None:
    """A launcher's options become lines of batch scripts, manifests and remote command lines: a newline or
    another control character in one (which would start a line of its own, or end SLURM's reading of the
    #SBATCH lines) is refused, naming the key."""
    for fld in dataclasses.fields(options):
        value = getattr(options, fld.name)
        for text in value if isinstance(value, tuple) else (value,):
            if isinstance(text, str) and not text.isprintable():
                raise where.error(fld.name, f"holds a newline or another control character ({config.shown(text)}); "
                                            f"a launcher's option must be one line of printable text")


def _complete_include(combo: dict[str, Any], matrix: Matrix, where: Where) -> dict[str, Any]:
    """An include entry with its missing axes filled from single-valued matrix axes (asv's rule)."""
    combo = dict(combo)
    for axis in AXES:
        if axis not in combo:
            axis_values = getattr(matrix, axis)
            if len(axis_values) != 1:
                raise where.error(axis, f"missing in an include entry and the matrix has several values "
                                        f"({', '.join(str(getattr(v, 'value', v)) for v in axis_values)})")
            combo[axis] = axis_values[0]
    return combo


def _workload_options(value: Any, where: Where) -> dict[Workload, dict[str, int | float]]:
    """Overrides of workload options; each is converted to the type of the option's preset value, within
    WORKLOAD_OPTION_BOUNDS (counts and sizes are integers >= 1, rates and targets numbers >= 0)."""
    table = config.expect_table(value, Where(where.file), "workload_options")
    result = {}
    for name, overrides in table.items():
        workload = config.convert(name, Workload, where, name)
        overrides = config.expect_table(overrides, where, name)
        sub = where.sub(name)
        presets = WORKLOADS[workload].presets
        known = presets.get(Size.FULL) or next(iter(presets.values()))
        config.check_keys(overrides, known, sub)
        result[workload] = {
            k: config.convert(v, type(known[k]), sub, k,
                              WORKLOAD_OPTION_BOUNDS_BY_NAME.get(k, WORKLOAD_OPTION_BOUNDS[type(known[k])]))
            for k, v in overrides.items()}
    return result


def builtin_quickstart() -> Path:
    """Path of the built-in quickstart scenario run by ``rosetta run`` with no file."""
    return Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.toml"


def combinations(scenario: Scenario) -> list[dict[str, Any]]:
    """The distinct configurations (axis -> value), in matrix order, includes last."""
    axes = [getattr(scenario.matrix, axis) for axis in AXES]
    combos = [dict(zip(AXES, values)) for values in itertools.product(*axes)]
    excluded = _index(scenario.exclude)
    combos = [c for c in combos if not any(tuple(c[a] for a in keys) in values for keys, values in excluded.items())]
    seen = {tuple(c[a] for a in AXES) for c in combos}
    for extra in scenario.include:
        if (key := tuple(extra[a] for a in AXES)) not in seen:
            seen.add(key)
            combos.append(dict(extra))
    return combos


def _index(rules: tuple[Mapping[str, Any], ...]) -> dict[tuple[str, ...], set[tuple]]:
    """Rules by the axes they name: each combination is then checked once per set of axes, not once per
    rule (100,000 excludes of one shape cost one set lookup per configuration)."""
    index: dict[tuple[str, ...], set[tuple]] = {}
    for rule in rules:
        keys = tuple(sorted(rule))
        index.setdefault(keys, set()).add(tuple(rule[a] for a in keys))
    return index


def _check_sizes(scenario: Scenario) -> None:
    """Some configuration is left to run, and every configuration's workload has the size it asks for."""
    where = Where(scenario.path, "matrix")
    combos = combinations(scenario)
    if not combos:
        raise Where(scenario.path).error("exclude", "removes every configuration of the matrix: nothing would run")
    for combo in combos:
        info = WORKLOADS[combo["workload"]]
        if combo["size"] not in info.presets:
            raise where.error("size", f"{info.name.value} has no size {combo['size'].value!r}; allowed: "
                                      f"{', '.join(s.value for s in info.presets)} (or exclude the combination)")
