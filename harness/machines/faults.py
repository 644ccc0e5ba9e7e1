"""Faults planted on the emulated cluster (harness/machines/emulated_cluster.py), as scenario data: a
``[faults]`` table names one fault's kind and size; its place (the rank or host) is drawn from its seed, so
that a benchmark plants hundreds by varying the seed alone (benchmarks/attribution.py), or given outright.

The placed fault travels in the run's ``emulation`` mapping (its ``fault`` key, plain data) to the ranks and
the launcher, which ask this module, in a few thin hooks, what it changes for them:

- ``slow_gpu``: one rank's compute x ``factor`` (its sleeps; :func:`compute_factor`)
- ``intermittent``: the same, on every ``every``-th step only (steps counted from the first, warm-up included)
- ``slow_nic``: one host's network card (its ``inter_link``'s ``tbf``) at ``rate_fraction`` of its rate
  (:func:`link`)
- ``long_link``: ``latency_s`` more latency (undilated) on packets arriving at one host's network card
- ``slow_loader``: one host's emulated input pipeline takes ``factor`` x the step per batch, the step being
  its compute plus the links' own exchange time (``link_exchange_s``: at most what a step takes), so that
  ``factor`` > 1 starves the host's GPUs whatever the exchange (with the scenario's own loader,
  ``input_workers``, its batch time x ``factor``; :func:`loader`)
- ``cpu_hog``: one host's ranks lose ``(factor - 1)`` x the step's compute a step to host work no device
  timer sees (slept after the update, outside forward and backward: :func:`host_delay_s`). A real hog in one
  network namespace would share this machine's cores with every emulated host, so it is emulated by the
  time it costs the host's ranks, not by a busy process.

Ranks are numbered host by host (rank // procs_per_node is the host's index), as torchrun, mpirun and
horovodrun place them on the emulated cluster's hosts. No deep-learning import here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Mapping

from harness.base import config
from harness.base.errors import UserError


class FaultKind(str, Enum):
    SLOW_GPU = "slow_gpu"
    SLOW_NIC = "slow_nic"
    LONG_LINK = "long_link"
    SLOW_LOADER = "slow_loader"
    CPU_HOG = "cpu_hog"
    INTERMITTENT = "intermittent"


class Blame(str, Enum):
    """What a fault slows, as attribution names it: its phase's kind."""

    COMPUTE = "compute"
    LINK = "link"
    INPUT = "input"
    HOST = "host"


RANK_KINDS = (FaultKind.SLOW_GPU, FaultKind.INTERMITTENT)  # placed on a rank; the others on a host
LINK_KINDS = (FaultKind.SLOW_NIC, FaultKind.LONG_LINK)
BLAME = {FaultKind.SLOW_GPU: Blame.COMPUTE, FaultKind.INTERMITTENT: Blame.COMPUTE, FaultKind.SLOW_NIC: Blame.LINK,
         FaultKind.LONG_LINK: Blame.LINK, FaultKind.SLOW_LOADER: Blame.INPUT, FaultKind.CPU_HOG: Blame.HOST}
PHASE_BLAME = {"compute": Blame.COMPUTE, "exchange": Blame.LINK, "data": Blame.INPUT, "rest": Blame.HOST,
               "link": Blame.LINK}  # an attribution_phase, or its attribution_kind "link" (a probed host link)


@dataclass(frozen=True)
class FaultOptions:
    """``[faults]``: one fault planted on the emulated cluster (device emulated, exchange gradients)."""

    kind: FaultKind
    # slow_gpu, intermittent: the rank's compute x; slow_loader: a batch's time / the step's; cpu_hog:
    # the host's ranks' step x (the extra outside compute)
    factor: float = field(default=1.3, metadata={"min": 1.0, "max": 10.0})
    rate_fraction: float = field(default=0.5, metadata={"min": 0.01, "max": 1.0})  # slow_nic: of the link's rate
    latency_s: float = field(default=1e-3, metadata={"min": 0.0, "max": 1.0})  # long_link: added (s, undilated)
    every: int = field(default=4, metadata={"min": 1, "max": 10_000})  # intermittent: every n-th step
    seed: int = field(default=0, metadata={"min": 0})  # the placement's seed
    rank: int = field(default=-1, metadata={"min": -1})  # rank kinds: this rank (-1: drawn from the seed)
    host: int = field(default=-1, metadata={"min": -1})  # host kinds: this host's index (-1: drawn)


def parse(table: Any, emulation: Any, where: config.Where) -> FaultOptions | None:
    """``[faults]`` of a scenario (None without one): only on the emulated cluster (``[emulation]`` with
    exchange gradients), a network card's fault only where the hosts have one (``inter_link``)."""
    if table is None:
        return None
    options = config.build(FaultOptions, config.expect_table(table, where, "faults"), where.sub("faults"))
    if emulation is None or getattr(emulation.exchange, "value", "") != "gradients":
        raise where.error("faults", 'only on the emulated cluster: [emulation] with exchange = "gradients"')
    if options.kind in LINK_KINDS and not emulation.inter_link:
        raise where.sub("faults").error("kind", f"{options.kind.value} slows a host's network card: "
                                                f"[emulation] needs an inter_link")
    return options


def place(options: FaultOptions, nodes: int, procs_per_node: int) -> dict[str, Any]:
    """The placed fault (plain data, the ``emulation`` mapping's ``fault``): its rank (rank kinds) and host
    index, drawn from its seed where not given; a one-line error for a place the cluster has not."""
    world, kind = nodes * procs_per_node, options.kind
    draw = random.Random(f"fault/{kind.value}/{options.seed}")
    if kind in LINK_KINDS and nodes < 2:
        raise UserError(f"faults: {kind.value} slows a host's network card: it needs 2 hosts or more")
    if kind in RANK_KINDS:
        rank = options.rank if options.rank >= 0 else draw.randrange(world)
        if rank >= world:
            raise UserError(f"faults: rank {rank} is not one of the run's {world} ranks")
        host = rank // procs_per_node
    else:
        rank, host = None, options.host if options.host >= 0 else draw.randrange(nodes)
        if host >= nodes:
            raise UserError(f"faults: host {host} is not one of the run's {nodes} hosts (0 to {nodes - 1})")
    return {"kind": kind.value, "rank": rank, "host": host, "procs_per_node": procs_per_node,
            "factor": options.factor, "rate_fraction": options.rate_fraction, "latency_s": options.latency_s,
            "every": options.every, "seed": options.seed}


def severity(fault: Mapping[str, Any]) -> float:
    """The fault's size in its own unit: factor (x), rate fraction or added latency (s)."""
    kind = FaultKind(fault["kind"])
    return fault["rate_fraction"] if kind == FaultKind.SLOW_NIC else (
        fault["latency_s"] if kind == FaultKind.LONG_LINK else fault["factor"])


def _on(emulation: Mapping[str, Any], rank: int, *kinds: FaultKind) -> Mapping[str, Any] | None:
    """The run's fault if it is one of ``kinds`` and lies on ``rank`` (rank kinds) or on its host."""
    fault = emulation.get("fault")
    if not fault or FaultKind(fault["kind"]) not in kinds:
        return None
    if fault["rank"] is not None:
        return fault if fault["rank"] == rank else None
    return fault if rank // fault["procs_per_node"] == fault["host"] else None


def compute_factor(emulation: Mapping[str, Any], rank: int, step: int) -> float:
    """The multiple of its compute that ``rank``'s step ``step`` (0 first, warm-up included) takes."""
    fault = _on(emulation, rank, FaultKind.SLOW_GPU, FaultKind.INTERMITTENT)
    if fault is None or (fault["kind"] == FaultKind.INTERMITTENT.value and step % fault["every"] != fault["every"] - 1):
        return 1.0
    return float(fault["factor"])


def host_delay_s(emulation: Mapping[str, Any], rank: int) -> float:
    """Seconds (dilated) a step of ``rank`` loses to a CPU hog on its host, outside its device's timers."""
    fault = _on(emulation, rank, FaultKind.CPU_HOG)
    if fault is None:
        return 0.0
    return (fault["factor"] - 1.0) * float(emulation["compute_s"]) * float(emulation["dilation"])


def loader(emulation: Mapping[str, Any], rank: int) -> tuple[int, float] | None:
    """(workers, one batch's seconds in one worker, undilated) of ``rank``'s emulated host loader: the
    scenario's (``input_workers``), its batches ``factor`` x slower where a slow loader is on the rank's host,
    or one worker at ``factor`` x (compute + the links' exchange) where the scenario has none; None without
    either."""
    fault = _on(emulation, rank, FaultKind.SLOW_LOADER)
    workers = int(emulation.get("input_workers") or 0)
    if fault is None:
        return (workers, float(emulation["input_batch_s"])) if workers else None
    if workers:
        return workers, float(emulation["input_batch_s"]) * fault["factor"]
    step = float(emulation["compute_s"]) + float(emulation.get("link_exchange_s") or 0.0)
    return 1, float(fault["factor"]) * step


def link(emulation: Mapping[str, Any], host: int, link_: Any) -> Any:
    """Host ``host``'s network card: ``link_`` (an emulated_cluster.Link, which imports this module), at a fraction of its rate (slow_nic) or with added latency
    (long_link) where the fault is on that host."""
    fault = emulation.get("fault")
    if not fault or fault["host"] != host or FaultKind(fault["kind"]) not in LINK_KINDS:
        return link_
    if fault["kind"] == FaultKind.SLOW_NIC.value:
        return replace(link_, bandwidth_Bps=link_.bandwidth_Bps * fault["rate_fraction"])
    return replace(link_, latency_s=link_.latency_s + fault["latency_s"])


def fault_fields(ranks: list[Any]) -> dict[str, Any]:
    """The row's fault columns from the ranks' ``emulation`` records (empty where none was planted): kind,
    rank, host (its name, as the hello of its first rank said), size and period, the seed that placed it."""
    fault = next((r.emulation.get("fault") for r in ranks if r.emulation and r.emulation.get("fault")), None)
    if not fault:
        return {}
    first = {r.rank: r for r in ranks}.get(fault["host"] * fault["procs_per_node"])
    return {"fault_kind": fault["kind"], "fault_rank": fault["rank"],
            "fault_host": (first.hello or {}).get("host") if first else None,
            "fault_severity": severity(fault),
            "fault_every": fault["every"] if fault["kind"] == FaultKind.INTERMITTENT.value else None,
            "fault_seed": fault["seed"]}
