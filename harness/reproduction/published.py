"""What a reference needs against what the registries have, and its published configuration as a
scenario (``rosetta reproduce NAME --at published``).

Whether a reference runs here follows from data on both sides: the reference's ``[requires]``
(frameworks, strategies, storage, workloads, devices, launchers) and the registries' declarations
(``frameworks.REGISTRY`` and each framework's ``FrameworkInfo``, ``harness.launchers.REGISTRY``),
never from prose written once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import frameworks
from harness import launchers
from harness.base.errors import UserError
from harness.experiment import scenario
from harness.experiment.matrix import expand
from harness.reproduction import reproduce
from harness.reproduction.reference import PublishedRun, Reference, Requirements
from harness.running.runner import skip_reason

# The capabilities a framework declares, by FrameworkInfo's (and Requirements') field names.
_DECLARED = ("strategies", "storage", "workloads", "devices")


def missing(req: Requirements) -> list[str]:
    """The capabilities ``req`` names that no registry provides, in words ([] when all are there)."""
    known = frameworks.names()
    out = [f"framework {f}" for f in req.frameworks if f not in known]
    infos = [frameworks.get(f) for f in (req.frameworks or known) if f in known]
    for kind in _DECLARED:
        for name in getattr(req, kind):
            declared = {getattr(v, "value", v) for info in infos for v in getattr(info, kind)}
            if name not in declared:
                out.append(f"{kind} {name}" + (f" in {', '.join(req.frameworks)}" if req.frameworks else ""))
    out += [f"launcher {name}" for name in req.launchers if name not in launchers.names()]
    return out


def reduced_here(ref: Reference) -> str:
    """Whether the reduced run (``[reproduce]``, this machine's scale) runs here: its runs counted
    with the harness's own skip rule, or why there is none (the registries' answer first)."""
    if not ref.reproduce.scenario:
        lacking = missing(ref.requires)
        if lacking:
            return "no: the registries have no " + ", ".join(lacking)
        if ref.requires.pending:
            return f"not yet: {ref.requires.pending}"
        return f"no: needs {ref.requires.hardware}" if ref.requires.hardware else "no scenario (a defect)"
    specs = expand(reproduce.scenario_for(ref))
    runnable = sum(skip_reason(s) is None for s in specs)
    return f"yes: {runnable}/{len(specs)} runs" if runnable else f"no: 0/{len(specs)} runs ({skip_reason(specs[0])})"


def published_here(ref: Reference) -> str:
    """Whether ``--at published`` can plan the published configuration, and what it needs."""
    if ref.published is None:
        return "-"
    lacking = missing(ref.requires)
    no_cuda = [run.framework for run in ref.published.runs
               if "cuda" not in {d.value for d in frameworks.get(run.framework).devices}]
    if not any(item.startswith("devices cuda") for item in lacking):
        lacking += [f"{name} on cuda" for name in dict.fromkeys(no_cuda)]
    pts = points(ref)
    where = f"{len(pts)} points, up to {max(p.gpus for p in pts)} GPUs in {max(p.nodes for p in pts)} node(s)"
    return f"planned ({where}), but the registries have no {', '.join(lacking)}" if lacking else f"yes: {where}"


@dataclass(frozen=True)
class Point:
    """One published point as this harness runs it: ``gpus`` workers in ``nodes`` x ``procs_per_node``."""

    run: PublishedRun
    gpus: int
    nodes: int
    procs_per_node: int


def points(ref: Reference) -> list[Point]:
    """Every (series run, GPU count) of the published configuration, nodes filled in order."""
    pub = _published(ref)
    series = {s.label: s for s in ref.series}
    out = []
    for run in pub.runs:
        for gpus in series[run.series].gpus:
            nodes = math.ceil(gpus / pub.gpus_per_node)
            if gpus % nodes:
                raise UserError(f"{ref.path}: {gpus} GPUs do not fill {nodes} nodes of {pub.gpus_per_node} evenly")
            out.append(Point(run, gpus, nodes, gpus // nodes))
    return out


def published_scenario(ref: Reference, *, launcher: str = "auto", device: str = "cuda",
                       settings: Mapping[str, Any] | None = None, size: str | None = None,
                       batch_per_worker: int | None = None, precision: str | None = None,
                       launcher_options: Mapping[str, Any] | None = None) -> scenario.Scenario:
    """The published configuration as a scenario: one include entry per published point.

    The keyword overrides make a scaled-down version of the same path (a tiny size, CPU, a small
    batch, fp32) for machines without the published hardware; ``None`` keeps the published value.
    """
    doc = published_document(ref, launcher=launcher, device=device, settings=settings, size=size,
                             batch_per_worker=batch_per_worker, precision=precision,
                             launcher_options=launcher_options)
    return scenario.parse(doc, f"{ref.path} [published]", default_name=doc["name"])


def published_document(ref: Reference, *, launcher: str = "auto", device: str = "cuda",
                       settings: Mapping[str, Any] | None = None, size: str | None = None,
                       batch_per_worker: int | None = None, precision: str | None = None,
                       launcher_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:func:`published_scenario`'s document (a scenario file's tables), before it is parsed."""
    pub = _published(ref)
    combos = []
    for p in points(ref):
        combo = {"framework": p.run.framework, "workload": pub.workload_of(p.run), "size": size or pub.size,
                 "storage": pub.storage, "nodes": p.nodes, "procs_per_node": p.procs_per_node,
                 "batch_per_worker": p.run.batch_per_worker if batch_per_worker is None else batch_per_worker,
                 "precision": precision or p.run.precision, "launcher": launcher, "strategy": p.run.strategy}
        if combo not in combos:
            combos.append(combo)
    doc = {"name": f"published-{ref.id}", "description": f"{ref.id} at its published configuration",
           "settings": {"warmup_steps": 10, "measured_steps": 50, "repeats": 3, "device": device,
                        **{k: v for k, v in (settings or {}).items() if v is not None}},
           "matrix": {k: v for k, v in combos[0].items()}, "include": combos[1:],
           "launcher_options": dict(launcher_options or {})}
    reproduce.fit_warmup(doc["settings"])
    return doc


def _published(ref: Reference):
    if ref.published is None:
        raise UserError(f"{ref.id}: no [published] configuration in {ref.path}; only the reduced run exists")
    return ref.published
