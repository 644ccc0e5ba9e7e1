"""Where a multi-rank run's time went, per rank, from the records its ranks already write.

Per rank, in seconds per measured step (means over the raw per-step records):
  ``step``       the rank's measured step time (its ``step`` records)
  ``compute``    forward + backward compute, as DDP's reducer timed it (``ddp_timing`` record) or the framework's
                 own timers (``pass_timing``: Horovod-PyTorch, Chainer; frameworks/shared/pass_timing.py); None
                 where the framework wrote neither (then the rank's compute is not told apart from ``rest``)
  ``peer_wait``  the part of the exchange spent waiting for a slower rank: the rank's exposed exchange minus
                 the least exposed exchange of any rank (the rank that came last to the collective waited for
                 no one, so its exposed exchange is the wire and the collective alone), whatever made the
                 others late: compute, an input stall, a sleep no timer saw; and the wait in DDP's forward
                 (its buffers' broadcast): the forward beyond the least forward / backward ratio of the
                 ranks x the rank's backward. Without ``ddp_timing``: the
                 slowest rank's data wait minus this rank's, at most what is left of its step
  ``exchange``   the exchange's exposed time (backward communication not overlapped with compute) beyond
                 ``peer_wait``: the least exposed exchange over the ranks, the wire and the collective themselves
  ``data``       waiting for the input pipeline (the ``data`` record's data_wait_s / measured steps; an emulated
                 host loader's wait, its ``emulation`` record's input_stall x the window / steps, which DDP's
                 forward timer also saw and is taken out of ``compute``); 0 for synthetic data
  ``rest``       the step minus the parts above (the optimizer, the host's bookkeeping, what no timer saw)

The slowest rank is the one the others wait for: the largest ``own`` time (step - peer_wait, what the rank spent
on its own work). Its ``straggler_score`` is its own time / the median rank's (1.0: no straggler), as NVIDIA's
resiliency extension scores a rank's section against its peers; ``attribution_phase`` is the phase in which it
exceeds the median rank most (seconds).

A slow link shows on no rank's totals: a synchronous exchange runs at its slowest link's pace, so every rank's
exchange grows alike. Per host, then (frameworks/shared/link_probe.py: each host's first rank times an
exchange with every other host's, after the window):
  ``link``       the host's median over its pairs of one pairwise exchange (seconds, as measured); a host
                 whose card is slow or whose link is long is slow in every pair it is in, any other in one
The slowest host's ``link_score`` is its link / the median host's. The attribution names first
(``attribution_kind``, ``attribution_host``) the slow link where its score is at least :data:`LINK_SCORE` and
above the straggler's, else the straggler with its phase's kind (:data:`PHASE_KIND`). Imports
``harness.contract`` only.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from harness.contract.events import RankRecord

FILE = "attribution.json"  # every rank's breakdown (Attribution.table), kept in the run's folder
FORMAT = 1
PHASES = ("compute", "peer_wait", "exchange", "data", "rest")
OWN_PHASES = ("compute", "exchange", "data", "rest")  # what a rank spends on its own, not waiting for peers
PHASE_KIND = {"compute": "compute", "exchange": "link", "data": "input", "rest": "host"}  # what a phase blames
# A host's link is named slow from this score (its probe / the median host's): a fault-free probe's hosts
# differed by under 1% on 4 emulated hosts (load 20), a half-rate card's scored 1.48, a 1 ms longer link's
# 1.34 (benchmarks/RESULTS.md)
LINK_SCORE = 1.15


@dataclass(frozen=True)
class HostLink:
    """One host's link, from its first rank's ``link_probe`` record: its median pair (seconds per exchange)."""

    index: int  # the host's index (rank // ranks per host)
    host: str | None  # its name, as its first rank's hello said
    seconds: float
    pairs: int


@dataclass(frozen=True)
class RankTime:
    """One rank's step, split into phases (seconds per measured step; compute None where not timed)."""

    rank: int
    host: str | None
    step: float
    compute: float | None
    peer_wait: float
    exchange: float
    data: float
    rest: float

    @property
    def own(self) -> float:
        """Seconds per step this rank spent on its own work (its step less the wait for slower peers)."""
        return self.step - self.peer_wait

    def phase(self, name: str) -> float:
        value = getattr(self, name)
        return 0.0 if value is None else value


@dataclass(frozen=True)
class Attribution:
    """A run's per-rank breakdown and its straggler: who, where, by how much against the median rank."""

    ranks: tuple[RankTime, ...]
    slowest: RankTime
    median_own: float  # the median rank's own time (s per step)
    straggler_score: float  # slowest rank's own time / median_own
    phase: str  # the phase in which the slowest rank exceeds the median most
    links: tuple[HostLink, ...] = ()  # each host's probed link (none: no probe, or one host)

    @property
    def slow_link(self) -> HostLink | None:
        return max(self.links, key=lambda h: h.seconds, default=None)

    @property
    def median_link_s(self) -> float | None:
        return statistics.median(h.seconds for h in self.links) if self.links else None

    @property
    def link_score(self) -> float | None:
        """The slowest host's link / the median host's (None without a probe of 3 hosts or more: of two, each
        pair is the other's too)."""
        median = self.median_link_s
        return self.slow_link.seconds / median if len(self.links) >= 3 and median and median > 0 else None

    @property
    def link_named(self) -> bool:
        """Whether the slow link is named first: its score at least LINK_SCORE and above the straggler's."""
        score = self.link_score
        return score is not None and score >= LINK_SCORE and score > self.straggler_score

    @property
    def kind(self) -> str:
        """What is named first: link (a host's probed link) or the straggler's phase's kind."""
        return "link" if self.link_named else PHASE_KIND[self.phase]

    @property
    def host(self) -> str | None:
        """The host named first: the slow link's or the straggler's."""
        return self.slow_link.host if self.link_named else self.slowest.host

    def median(self, phase: str) -> float:
        """The median over ranks of one phase's seconds per step."""
        return statistics.median(r.phase(phase) for r in self.ranks)

    def row_fields(self) -> dict[str, Any]:
        """The result row's columns: the slowest rank, its host, its score, its phases and the median rank's
        (seconds per step) and the phase to blame."""
        fields: dict[str, Any] = {"slowest_rank": self.slowest.rank, "slowest_host": self.slowest.host,
                                  "straggler_score": self.straggler_score, "attribution_phase": self.phase,
                                  "attribution_kind": self.kind, "attribution_host": self.host}
        for name in OWN_PHASES:
            fields[f"slowest_{name}_s"] = self.slowest.phase(name)
            fields[f"median_{name}_s"] = self.median(name)
        if self.links:
            fields.update(link_host=self.slow_link.host, link_score=self.link_score,
                          slowest_link_s=self.slow_link.seconds, median_link_s=self.median_link_s)
        return fields

    def link_table(self) -> list[dict[str, Any]]:
        """One row per probed host (seconds per exchange), for the per-rank table file's ``links``."""
        median = self.median_link_s
        return [{"host_index": h.index, "host": h.host, "link_s": h.seconds, "pairs": h.pairs,
                 "score": h.seconds / median if median else None} for h in self.links]

    def table(self) -> list[dict[str, Any]]:
        """One tidy row per rank (seconds per step), for the per-rank table file kept beside the events."""
        return [{"rank": r.rank, "host": r.host, "step_s": r.step, "compute_s": r.compute,
                 "peer_wait_s": r.peer_wait, "exchange_s": r.exchange, "data_s": r.data, "rest_s": r.rest,
                 "own_s": r.own, "score": r.own / self.median_own if self.median_own > 0 else None}
                for r in self.ranks]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _data_s(record: RankRecord) -> tuple[float, float]:
    """(data wait, of it the emulated host loader's) seconds per measured step: the ``data`` record's wait and
    the ``emulation`` record's input stall (its fraction of the window), which an emulated rank waits inside
    its forward."""
    steps = len(record.step_seconds)
    real = record.data["data_wait_s"] / steps if record.data else 0.0
    emulated = record.emulation or {}
    loader = (emulated.get("input_stall") or 0.0) * (record.window or {}).get("seconds", 0.0) / steps
    return real + loader, loader


def _passes(record: RankRecord) -> tuple[float, float, float] | None:
    """(forward, backward, exposed exchange) seconds per step from the rank's ``ddp_timing`` (or
    ``pass_timing``) record, None without; the forward less the emulated host loader's wait, which its timer
    holds."""
    steps = (record.ddp_timing or record.pass_timing or {}).get("steps") or []
    if not steps:
        return None
    forward = max(0.0, _mean([s["forward_compute_s"] for s in steps]) - _data_s(record)[1])
    exposed = _mean([max(0.0, s["backward_comm_s"] - s["overlap_s"]) for s in steps])
    return forward, _mean([s["backward_compute_s"] for s in steps]), exposed


def _least_ratio(records: Sequence[RankRecord]) -> float | None:
    """The least forward / backward ratio over the timed ranks: the model's own, of a rank that waited for
    no one in its forward."""
    ratios = [f / b for f, b, _ in filter(None, map(_passes, records)) if b > 0]
    return min(ratios, default=None)


def _timed(record: RankRecord, ratio: float | None = None) -> tuple[float | None, float, float]:
    """(compute, exposed exchange, forward wait) seconds per step, (None, 0, 0) without ``ddp_timing``. DDP's
    forward begins with a collective where the model has buffers (their broadcast: BatchNorm's statistics),
    so a rank early for it waits there, inside the forward's timer: its forward beyond ``ratio`` x its
    backward (the least ratio over the ranks) is that wait, not compute. A slow GPU's forward and backward
    grow together and keep the ratio."""
    passes = _passes(record)
    if passes is None:
        return None, 0.0, 0.0
    forward, backward, exposed = passes
    wait = max(0.0, forward - backward * ratio) if ratio is not None and backward > 0 else 0.0
    return forward - wait + backward, exposed, wait


def _rank_time(record: RankRecord, least_exposed: float, most_data: float, ratio: float | None) -> RankTime:
    """One rank's phases. Timed: the wait for peers is its exposed exchange beyond ``least_exposed`` (that of
    the rank that came last) and its forward's wait (:func:`_timed`); untimed, the wait hides in what is left
    of the step: the most any rank waited for data (``most_data``) beyond its own, at most that rest."""
    step = _mean(record.step_seconds)
    compute, exposed, forward_wait = _timed(record, ratio)
    data = _data_s(record)[0]
    rest = max(0.0, step - (compute or 0.0) - forward_wait - exposed - data)
    if compute is not None:
        peer_wait = max(0.0, exposed - least_exposed)
        exposed -= peer_wait
        peer_wait += forward_wait
    else:
        peer_wait = max(0.0, min(rest, most_data - data))
        rest -= peer_wait
    return RankTime(record.rank, (record.hello or {}).get("host"), step, compute, peer_wait, exposed, data, rest)


def host_links(ranks: Sequence[RankRecord]) -> tuple[HostLink, ...]:
    """Each probed host's link: the median of its pairs' exchanges (seconds), from its ``link_probe`` record."""
    found = []
    for record in ranks:
        probe = record.link_probe or {}
        pairs = [p["seconds"] for p in probe.get("pairs") or []]
        if pairs:
            found.append(HostLink(int(probe["host"]), (record.hello or {}).get("host"), statistics.median(pairs),
                                  len(pairs)))
    return tuple(sorted(found, key=lambda h: h.index))


def attribute(ranks: Sequence[RankRecord]) -> Attribution | None:
    """The per-rank breakdown of a run of two or more training ranks with measured steps (else None)."""
    trained = [r for r in ranks if r.trains and r.step_seconds]
    if len(trained) < 2:
        return None
    least_exposed = min((p[2] for p in map(_passes, trained) if p is not None), default=0.0)
    most_data = max(_data_s(r)[0] for r in trained)
    ratio = _least_ratio(trained)
    times = tuple(_rank_time(r, least_exposed, most_data, ratio) for r in trained)
    slowest = max(times, key=lambda t: t.own)
    median_own = statistics.median(t.own for t in times)
    median_phase = {name: statistics.median(t.phase(name) for t in times) for name in OWN_PHASES}
    phase = max(OWN_PHASES, key=lambda name: slowest.phase(name) - median_phase[name])
    score = slowest.own / median_own if median_own > 0 else 1.0
    return Attribution(times, slowest, median_own, score, phase, host_links(ranks))


def read_table(run_dir: Path) -> list[dict[str, Any]] | None:
    """The per-rank table kept in ``run_dir`` (:data:`FILE`, seconds per measured step as measured), None where
    the folder has none or not one of this format (a hand-edited or truncated file is not a crash)."""
    try:
        kept = json.loads((Path(run_dir) / FILE).read_text())
    except (OSError, ValueError):
        return None
    ranks = kept.get("ranks") if isinstance(kept, dict) and kept.get("format") == FORMAT else None
    if not isinstance(ranks, list) or not all(isinstance(r, dict) and isinstance(r.get("rank"), int) for r in ranks):
        return None
    return ranks or None
