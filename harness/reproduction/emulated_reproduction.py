"""``rosetta reproduce NAME --at emulated``: a reference's published configuration on the emulated GPU cluster
(harness/machines/emulated_cluster.py): the published GPUs per node, nodes per point, batch, precision,
framework and interconnect, each GPU an emulated accelerator (``[published] accelerator``) whose real
gradients cross the published links, shaped and time-dilated, between network-namespace hosts.

What covers a reference is data on both sides: its ``[published]`` accelerator, links and runs, and the
registries (an accelerator profile for every run's batch and precision; the framework's declared
``emulated_exchanges``). Each point is laid out by harness/reproduction/emulated_plan.py: at full size where its
processes fit this machine's memory, else reduced where its framework can (one process a host, gradients at
1/32; a sharded reference always, its model 1/s of its size), else a skipped row saying so.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

import numpy as np
import pandas as pd

import frameworks
from harness import launchers
from harness.base.errors import UserError
from harness.contract.axes import Exchange, Precision, Strategy, Workload
from harness.experiment import scenario
from harness.experiment.matrix import expand
from harness.machines import accelerators
from harness.reproduction import emulated_plan as plan
from harness.reproduction.emulated_plan import layout, max_ranks, rank_bytes
from harness.reproduction.published import points, published_document
from harness.reproduction.reference import Reference
from harness.results import metrics

GRADIENTS = {"exchange": Exchange.GRADIENTS.value}  # an emulated cluster's [emulation], as far as support goes


def coverage(ref: Reference) -> str | None:
    """Why ``--at emulated`` cannot run the reference's published configuration, or None."""
    pub = ref.published
    if pub is None:
        return "no [published] configuration"
    for run in pub.runs:
        if not (run.accelerator or pub.accelerator):
            return (f"no [published] accelerator (a profile of harness/machines/accelerators.toml) for series "
                    f"{run.series!r}")
        if run.framework not in frameworks.names():
            return f"no framework {run.framework}"
        info = frameworks.get(run.framework)
        reason = (info.unsupported_exchange(Strategy(run.strategy), GRADIENTS)
                  or info.unsupported_reduction(Strategy(run.strategy), plan.sharded_reduction(ref)))
        if reason:
            return reason
        try:
            accelerators.lookup(run.accelerator or pub.accelerator, Workload(pub.workload_of(run)),
                                run.batch_per_worker, Precision(run.precision), accelerators.load_profiles()[0])
        except UserError as exc:
            return str(exc).removeprefix("emulation: ")
    return None


def emulated_series(ref: Reference) -> list[tuple[str, Reference]]:
    """The published configuration cut where its series differ in what the emulated cluster is made of (their
    accelerator, links): (scenario name, the reference with those series only and their accelerator and links
    as its own), one scenario each, since a scenario's [emulation] is one. One entry, named as before, where
    every series shares them."""
    pub = ref.published
    groups: dict[tuple[str, str, str], list] = {}
    for run in pub.runs:
        key = (run.accelerator or pub.accelerator, run.intra_link or pub.intra_link, run.inter_link or pub.inter_link)
        groups.setdefault(key, []).append(run)
    out = []
    for i, ((accelerator, intra, inter), runs) in enumerate(groups.items()):
        name = f"emulated-{ref.id}" + (f"-series{i + 1}" if len(groups) > 1 else "")
        published = dataclasses.replace(pub, accelerator=accelerator, intra_link=intra, inter_link=inter,
                                        runs=tuple(runs))
        out.append((name, dataclasses.replace(ref, published=published)))
    return out


def scenario_of(ref: Reference, series: str) -> str | None:
    """The emulated scenario's name that runs ``series``; None where one scenario runs them all."""
    cut = emulated_series(ref)
    if len(cut) == 1:
        return None
    return next(name for name, part in cut if series in {run.series for run in part.published.runs})


def emulated_here(ref: Reference) -> str:
    """``rosetta reproduce --list``'s column: what ``--at emulated`` runs of the reference, or why not."""
    reason = coverage(ref) if ref.published is not None else None
    if ref.published is None:
        return "-"
    if reason:
        return f"no: {reason}"
    pts = points(ref)
    most = max(p.gpus for p in pts)
    beyond = _beyond_memory(ref)
    kinds = "/".join(dict.fromkeys(part.published.accelerator for _, part in emulated_series(ref)))
    cut = len(emulated_series(ref))
    each = f", a scenario per series' own accelerator and links ({cut})" if cut > 1 else ""
    return f"yes: {len(pts)} points, up to {most} emulated {kinds} GPUs{each}{beyond}"


def _beyond_memory(ref: Reference) -> str:
    """What ``--list`` adds where points run reduced (emulated_plan.layout) or are skipped for memory."""
    reduced: list[int] = []
    skipped: dict[str, list[int]] = {}
    for p in points(ref):
        lay = layout(ref, p.run.framework, p.run.strategy, p.nodes, p.procs_per_node)
        if not plan.fits(ref, p.run.framework, lay):
            skipped.setdefault(p.run.framework, []).append(p.gpus)
        elif lay.reduced:
            reduced.append(p.gpus)
    sharded = plan.sharded_reduction(ref)
    if sharded:
        scale = sharded["gradient_scale"]
        text = (f"; reduced: a process for {sharded['gpus_per_rank']} GPUs, parameters 1/{scale} of their size "
                f"over links {scale} times slower")
    elif reduced:
        text = (f"; {min(reduced)} GPUs and more reduced (a process a host, gradients at "
                f"1/{plan.REDUCED_GRADIENT_SCALE})")
    else:
        text = ""
    for name, gpus in skipped.items():
        why = frameworks.get(name).unsupported_reduction(Strategy.ALLREDUCE, {"gradient_scale": 2}) or "memory"
        text += (f"; {name}'s points of {min(gpus)} GPUs and more skipped ({rank_bytes(ref, 1, name) / 1e6:.0f} MB "
                 f"a rank; {why})")
    return text


# A reduced cluster's many hosts launch through mpirun where the framework has it: its agent on a host (orted)
# imports nothing, where torchrun's imports torch; torchrun's 16 agents for torchtitan's 128 GPUs did not all
# meet within its rendezvous timeout on this 2-core machine under a load of 30 (benchmarks/emulated_scale.py
# launches through mpirun for the same reason)
REDUCED_LAUNCHER = "mpirun"


def launcher_for(framework: str, reduced: bool = False) -> str:
    """The framework's first launcher that reaches network-namespace hosts (REDUCED_LAUNCHER first, ``reduced``)."""
    reaching = launchers.netns_launchers()  # a launcher's fact, in its declaration (NETNS_PREFERENCE)
    usable = [name for name in frameworks.get(framework).launchers if name in reaching]
    if not usable:
        raise UserError(f"{framework}: none of its launchers reaches network-namespace hosts ({', '.join(reaching)})")
    return REDUCED_LAUNCHER if reduced and REDUCED_LAUNCHER in usable else usable[0]


def emulated_scenarios(ref: Reference, hosts: Mapping[str, str], settings: Mapping[str, Any] | None = None,
                       dilation: float = 0.0, framework: str | None = None,
                       available: int | None = None) -> list[scenario.Scenario]:
    """The published configuration on emulated hosts ``hosts`` (name -> address), to run one after another: a
    scenario per part of :func:`emulated_series` (each of its series over its own accelerator and links), cut
    again where its points are laid out differently (emulated_plan.layout: full size, or reduced to fit
    ``available`` bytes, default: now's), since a scenario's [emulation] is one. Device emulated, real
    gradients, ``framework`` where another one than the published; warm-up 1, 4 measured steps and one repeat
    unless ``settings`` say otherwise (a dilated step of 16 GPUs lasts tens of seconds)."""
    reason = coverage(ref)
    if reason:
        raise UserError(f"{ref.id}: --at emulated: {reason}")
    out = []
    for name, part in emulated_series(ref):
        doc, groups = _laid_out(part, settings, framework, available)
        for (gpus_per_rank, scale), combos in groups.items():
            suffix = f"-reduced-{gpus_per_rank}-a-process" if scale > 1 and len(groups) > 1 else ""
            out.append(_scenario(part, doc, hosts, dilation, name + suffix, combos, (gpus_per_rank, scale)))
    return out


def emulated_scenario(ref: Reference, hosts: Mapping[str, str], settings: Mapping[str, Any] | None = None,
                      dilation: float = 0.0, framework: str | None = None, name: str = "") -> scenario.Scenario:
    """:func:`emulated_scenarios`' one scenario of a reference whose series share their accelerator and links
    and whose points are laid out alike (else a UserError)."""
    reason = coverage(ref)
    if reason:
        raise UserError(f"{ref.id}: --at emulated: {reason}")
    doc, groups = _laid_out(ref, settings, framework, None)
    if len(groups) > 1:
        raise UserError(f"{ref.id}: its points are laid out {len(groups)} ways: see emulated_scenarios")
    [(reduction, combos)] = groups.items()
    return _scenario(ref, doc, hosts, dilation, name, combos, reduction)


def _laid_out(ref: Reference, settings: Mapping[str, Any] | None, framework: str | None, available: int | None
              ) -> tuple[dict[str, Any], dict[tuple[int, int], list[dict[str, Any]]]]:
    """The published document on the emulated device (see :func:`emulated_scenarios` for its settings) and its
    points' combinations as laid out (``framework``, their hosts, processes and launcher), grouped by their
    layout's (gpus_per_rank, gradient_scale)."""
    doc = published_document(ref, device="emulated", settings={"warmup_steps": 1, "measured_steps": 4, "repeats": 1,
                                                               "timeout_s": 3600, **(settings or {})})
    if framework:
        frameworks.FRAMEWORKS.check(framework, "--framework")
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for combo in (doc["matrix"], *doc["include"]):
        name = framework or combo["framework"]
        lay = layout(ref, name, combo["strategy"], combo["nodes"], combo["procs_per_node"], available)
        groups.setdefault(lay.key, []).append({**combo, "framework": name, "nodes": lay.nodes,
                                               "procs_per_node": lay.procs_per_node,
                                               "launcher": launcher_for(name, lay.reduced)})
    return doc, groups


def _scenario(ref: Reference, doc: Mapping[str, Any], hosts: Mapping[str, str], dilation: float, name: str,
              combos: list[dict[str, Any]], reduction: tuple[int, int]) -> scenario.Scenario:
    """``doc`` with ``combos`` as its points, on ``hosts``, over the published accelerator and links (the
    part's: one set, see :func:`emulated_series`), with ``reduction``'s (gpus_per_rank, gradient_scale)."""
    pub = ref.published
    names, addresses = list(hosts), list(hosts.values())
    emulation = {"accelerator": pub.accelerator, **GRADIENTS, "intra_link": pub.intra_link,
                 "inter_link": pub.inter_link, "dilation": dilation}
    if reduction != (1, 1):
        emulation.update(gpus_per_rank=reduction[0], gradient_scale=reduction[1])
    name = name or f"emulated-{ref.id}"
    doc = {**doc, "matrix": dict(combos[0]), "include": [dict(c) for c in combos[1:]], "emulation": emulation,
           "launcher_options": {launcher: netns_options(launcher, names, addresses)
                                for launcher in launchers.netns_launchers()},
           "name": name, "description": f"{ref.id} on the emulated cluster"}
    return scenario.parse(doc, f"{ref.path} [published, emulated]", default_name=name)


def netns_options(launcher: str, names: list[str], addresses: list[str]) -> dict[str, Any]:
    """``[launcher_options.<launcher>]`` naming the namespace hosts (and their addresses, where it takes them)."""
    takes = {f.name for f in dataclasses.fields(launchers.module(launcher).Options)}
    return {"hosts": names, "remote": "netns", **({"addresses": addresses} if "addresses" in takes else {})}


def reachable(ref: Reference, scenario_: scenario.Scenario) -> int:
    """The processes one of :func:`emulated_scenarios`' scenarios may start at once: those of its gradients'
    scale that this machine's memory holds (a point beyond them is a skipped row)."""
    used = {spec.framework for spec in expand(scenario_)}  # the hungriest of the scenario's frameworks
    return min(max_ranks(ref, scenario_.emulation.gradient_scale, framework=name) for name in used)


def hosts_needed(ref: Reference, framework: str | None = None, available: int | None = None) -> int:
    """The namespace hosts the largest point takes, as laid out (a reduced point's may be merged; ``framework``:
    the one run instead of the published)."""
    return max(layout(ref, framework or p.run.framework, p.run.strategy, p.nodes, p.procs_per_node, available).nodes
               for p in points(ref))


def error_lines(ref: Reference, rows: pd.DataFrame, predicted: pd.DataFrame) -> list[str]:
    """For a sweep on the emulated cluster: each point's efficiency (against the series' first point, as
    published) beside the published one, the error in percentage points with the point's dilation and
    whether this machine kept up, and the mean absolute error beside the scaling model's on the same points."""
    if rows.empty or "dilation" not in rows or not rows["device"].eq("emulated").all() or ref.published is None:
        return []
    lines = []
    series = {s.label: s for s in ref.series}
    for run in ref.published.runs:
        ok = rows[(rows["batch_per_worker"] == run.batch_per_worker) & (rows["precision"] == run.precision)
                  & (rows["status"] == "ok")]
        if "workload" in ok:  # a series of another model (Horovod's tables: three) than its neighbours
            ok = ok[ok["workload"] == ref.published.workload_of(run)]
        if (own := scenario_of(ref, run.series)) and "scenario" in ok:  # the series' own accelerator and links
            ok = ok[ok["scenario"] == own]
        by = ok.groupby("world_size").agg(tp=("throughput", "median"), k=("dilation", "max"),
                                          saturated=("emulation_saturated", lambda s: bool(s.fillna(False).any())))
        first = series[run.series].gpus[0]
        if first not in by.index:
            continue
        base = by.loc[first, "tp"] / first
        parts, errors, model, intervals = [], [], [], 0
        for n, published in zip(series[run.series].gpus[1:], series[run.series].efficiencies()[1:]):
            if n not in by.index:
                continue
            eff = by.loc[n, "tp"] / (n * base)
            errors.append((eff - published) * 100)
            interval = efficiency_interval(ok, first, n)
            intervals += interval is not None
            spread = f" ({interval[0]:.0%}-{interval[1]:.0%})" if interval else ""
            parts.append(f"{eff:.0%}{spread} vs {published:.0%} at {n} ({errors[-1]:+.1f} pp, k {by.loc[n, 'k']:g}"
                         f"{', emulation saturated: not a prediction' if by.loc[n, 'saturated'] else ''})")
            same = predicted[(predicted["series"] == run.series) & (predicted["workers"] == n)] if len(predicted) else []
            model += [abs(float(same["error_pp"].iloc[0]))] if len(same) else []
        if parts:
            ran = ", ".join(sorted(set(ok["framework"])))
            varied = sorted(set(ok["step_variation"].dropna())) if "step_variation" in ok else []
            steps = f"; steps varied as {', '.join(varied)}" if varied else "; steps exact"
            lines.append(f"Emulated ({ran}{steps}) vs published ({run.series}, {run.framework}): "
                         + "; ".join(parts) + ".")
            lines.append(f"Emulated cluster's mean absolute error: {sum(map(abs, errors)) / len(errors):.1f} pp over "
                         f"{len(errors)} point(s); the scaling model's on the same points: "
                         + (f"{sum(model) / len(model):.1f} pp." if len(model) == len(errors) else "not predicted.")
                         + (" In brackets: 95% intervals of the efficiency from resampling the measured steps."
                            if intervals else ""))
    return lines


def efficiency_interval(ok: pd.DataFrame, first: int, n: int) -> tuple[float, float] | None:
    """A 95% interval of the efficiency at ``n`` GPUs against ``first`` (mean step there / mean step here, the
    batch a GPU alike) by resampling the runs' measured steps (harness.results.metrics.bootstrap_ci); None
    where a point has under 3 steps. It is the steps' own noise: what more steps would settle, not a bias
    of the emulation."""
    sides = []
    for gpus in (first, n):
        cells = ok.loc[ok["world_size"] == gpus, "step_times_s"] if "step_times_s" in ok else pd.Series(dtype=object)
        steps = [json.loads(c) for c in cells.dropna()]
        if not steps or min(len(s) for s in steps) < 3:
            return None
        sides.append(steps)
    low, high = metrics.bootstrap_ci(*sides, statistic=np.mean)
    return 1 + low, 1 + high
