"""``rosetta reproduce NAME --at emulated``: a reference's published configuration on the emulated GPU cluster
(harness/machines/emulated_cluster.py): the published GPUs per node, nodes per point, batch, precision,
framework and interconnect, each GPU an emulated accelerator (``[published] accelerator``) whose real
gradients cross the published links, shaped and time-dilated, between network-namespace hosts.

What covers a reference is data on both sides: its ``[published]`` accelerator, links and runs, and the
registries (an accelerator profile for every run's batch and precision; the framework's declared
``emulated_exchanges``). A point that needs more emulated ranks than this machine's memory holds is a
skipped row saying so (each rank holds the model's parameters, gradients and the exchange's buffers).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Mapping

import numpy as np
import pandas as pd
import psutil

import frameworks
from harness import launchers
from harness.base.errors import UserError
from harness.contract.axes import Exchange, Precision, Size, Strategy, Workload
from harness.contract.workloads import WORKLOADS
from harness.experiment import scenario
from harness.machines import accelerators, model_flops
from harness.reproduction.published import points, published_document
from harness.reproduction.reference import Reference
from harness.results import metrics

RANK_BYTES_PER_GRADIENT_BYTE = 3  # parameters, gradients, DDP's buckets or Horovod's fusion buffer
# of the memory available now that the emulated ranks may take together; the rest is the harness's, the
# kernel's socket buffers' and the page cache's
MEMORY_SHARE = 0.85
GRADIENTS = {"exchange": Exchange.GRADIENTS.value}  # an emulated cluster's [emulation], as far as support goes
# A published configuration whose runs shard the model (FSDP: an 8B model's rank would hold 32 GB of fp32
# parameters before sharding) runs reduced (docs/scaling.md, "Beyond one rank per GPU"): its parameters 1/s
# of their size, s the least power of two that brings the fp32 model under SCALED_MODEL_BYTES, and each process
# standing for the fewest GPUs G (a power of two, at most a host's) that keeps the largest point within
# MAX_PROCESSES processes and this machine's memory. Data-parallel references keep their full size.
REDUCED_STRATEGIES = (Strategy.FSDP,)
SCALED_MODEL_BYTES = 32e6
# 2 cores, shared: a process imports torch and wakes for every collective; an emulated FSDP rank of Llama 3.1
# 8B at 1/1024 peaked at 491 MB (RSS), and 32 of them would have held 15.7 GB of this machine's 23
MAX_PROCESSES = 16


def _gradient_bytes(ref: Reference) -> float:
    pub = ref.published
    return 4 * max(_gradient_parameters(pub, run) for run in pub.runs)


def rank_bytes(ref: Reference, scale: int = 1) -> float:
    """Bytes one emulated rank of the published model needs, in the hungriest of its runs' frameworks
    (FrameworkInfo.emulated_rank_base_bytes; measured: 555 MB a DDP rank, 601 a Horovod one, for ResNet-50),
    its gradients 1/``scale`` of their size."""
    base = max(frameworks.get(run.framework).emulated_rank_base_bytes for run in ref.published.runs)
    return base + RANK_BYTES_PER_GRADIENT_BYTE * _gradient_bytes(ref) / scale


def reduction(ref: Reference) -> dict[str, int]:
    """``[emulation]``'s gpus_per_rank and gradient_scale for the reference (see REDUCED_STRATEGIES); empty
    where it runs at full size."""
    pub = ref.published
    if not any(Strategy(run.strategy) in REDUCED_STRATEGIES for run in pub.runs):
        return {}
    scale = 2 ** max(0, math.ceil(math.log2(_gradient_bytes(ref) / SCALED_MODEL_BYTES)))
    fits = min(MAX_PROCESSES, _ranks_in_memory(rank_bytes(ref, scale)))
    most = max(p.gpus for p in points(ref))
    gpus = 1
    while gpus * 2 <= pub.gpus_per_node and most / gpus > fits:
        gpus *= 2
    return {"gpus_per_rank": gpus, "gradient_scale": scale}


def _ranks_in_memory(one_rank_bytes: float) -> int:
    return max(1, int(psutil.virtual_memory().available * MEMORY_SHARE // one_rank_bytes))


def _gradient_parameters(pub, run) -> int:
    """The parameters of ``run``'s model an emulated rank holds a gradient of (the published count, or the
    weights the harness counts from the options where those are more)."""
    workload = Workload(pub.workload_of(run))
    options = WORKLOADS[workload].options(Size(pub.size))
    return max(pub.parameters_of(run), model_flops.weight_parameters(workload, options))


def max_ranks(ref: Reference) -> int:
    """Emulated ranks (processes) this machine's available memory holds at once."""
    return _ranks_in_memory(rank_bytes(ref, reduction(ref).get("gradient_scale", 1)))


def max_gpus(ref: Reference) -> int:
    """Emulated GPUs this machine holds at once: its processes, each standing for gpus_per_rank of them."""
    return max_ranks(ref) * reduction(ref).get("gpus_per_rank", 1)


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
                  or info.unsupported_reduction(Strategy(run.strategy), reduction(ref)))
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
    fits, reduced = max_gpus(ref), reduction(ref)
    most = max(p.gpus for p in pts)
    scale = reduced.get("gradient_scale", 1)
    beyond = "" if most <= fits else f"; points above {fits} GPUs skipped (memory: {rank_bytes(ref, scale) / 1e6:.0f} MB a rank)"
    if reduced:
        beyond += (f"; reduced: a process for {reduced['gpus_per_rank']} GPUs, parameters 1/{scale} of their size "
                   f"over links {scale} times slower")
    kinds = "/".join(dict.fromkeys(part.published.accelerator for _, part in emulated_series(ref)))
    cut = len(emulated_series(ref))
    each = f", a scenario per series' own accelerator and links ({cut})" if cut > 1 else ""
    return f"yes: {len(pts)} points, up to {most} emulated {kinds} GPUs{each}{beyond}"


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
                       dilation: float = 0.0, framework: str | None = None) -> list[scenario.Scenario]:
    """The published configuration on emulated hosts, a scenario per part of :func:`emulated_series`
    (each of its series over its own accelerator and links), to run one after another."""
    reason = coverage(ref)
    if reason:
        raise UserError(f"{ref.id}: --at emulated: {reason}")
    return [emulated_scenario(part, hosts, settings, dilation, framework, name) for name, part in emulated_series(ref)]


def emulated_scenario(ref: Reference, hosts: Mapping[str, str], settings: Mapping[str, Any] | None = None,
                      dilation: float = 0.0, framework: str | None = None, name: str = "") -> scenario.Scenario:
    """The published configuration on emulated hosts ``hosts`` (name -> address): device emulated, real
    gradients, the published accelerator and links (those of ``[published]``: one set for every series, see
    :func:`emulated_scenarios`; ``framework``: another one than the published); warm-up 1, 4 measured
    steps and one repeat unless ``settings`` say otherwise (a dilated step of 16 GPUs lasts tens of seconds)."""
    reason = coverage(ref)
    if reason:
        raise UserError(f"{ref.id}: --at emulated: {reason}")
    pub = ref.published
    doc = published_document(ref, device="emulated", settings={"warmup_steps": 1, "measured_steps": 4, "repeats": 1,
                                                               "timeout_s": 3600, **(settings or {})})
    if framework:
        frameworks.FRAMEWORKS.check(framework, "--framework")
    for combo in (doc["matrix"], *doc["include"]):
        combo["framework"] = framework or combo["framework"]
        combo["launcher"] = launcher_for(combo["framework"], bool(reduction(ref)))
    names, addresses = list(hosts), list(hosts.values())
    doc["launcher_options"] = {name: netns_options(name, names, addresses) for name in launchers.netns_launchers()}
    doc["emulation"] = {"accelerator": pub.accelerator, **GRADIENTS, "intra_link": pub.intra_link,
                        "inter_link": pub.inter_link, "dilation": dilation, **reduction(ref)}
    gpus = doc["emulation"].get("gpus_per_rank", 1)
    for combo in (doc["matrix"], *doc["include"]):  # a host's processes, each standing for its G GPUs
        combo["procs_per_node"] = max(1, combo["procs_per_node"] // gpus)
    doc["name"], doc["description"] = name or f"emulated-{ref.id}", f"{ref.id} on the emulated cluster"
    return scenario.parse(doc, f"{ref.path} [published, emulated]", default_name=doc["name"])


def netns_options(launcher: str, names: list[str], addresses: list[str]) -> dict[str, Any]:
    """``[launcher_options.<launcher>]`` naming the namespace hosts (and their addresses, where it takes them)."""
    takes = {f.name for f in dataclasses.fields(launchers.module(launcher).Options)}
    return {"hosts": names, "remote": "netns", **({"addresses": addresses} if "addresses" in takes else {})}


def hosts_needed(ref: Reference) -> int:
    return max(p.nodes for p in points(ref))


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
