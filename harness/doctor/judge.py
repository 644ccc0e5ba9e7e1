"""The doctor's judgement, pure: each measurement against its reference (a baseline of earlier checks of
the same machine type, else the median of this check's other measurements of the same probe), and the bisection
that halves a set of hosts until the slow pair or host is left. No process starts here.

Without a baseline the verdict is peer-relative: against the median of the other subjects of the same probe in
this check (the other hosts, GPUs or pairs), its tolerance widened by their spread (MAD / median) as a
baseline's is, never under the probe's floor (the least relative effect judged: 10% for a step), and a subject
probed more than once is judged by its best sample (:func:`combine`): a fault slows every sample, a loaded
kernel one, so one noisy sample cannot accuse; :func:`confirm` re-probes each suspect before it is named. A
measurement's ``slowdown`` is
how many times worse than its reference it is (reference / value for a
bandwidth, value / reference for a latency or a step time): 1 is as expected, 4 a quarter of the rate. It
is bad beyond ``1 + tolerance``, the tolerance being the larger of the probe's floor (:data:`FLOORS`) and
three times the baseline's own relative spread (its median absolute deviation / median), so that a store
of noisy earlier checks asks for more before it names anything.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterable, Sequence


class Probe(str, Enum):
    """What a measurement probes; its subject is a host, a GPU (``host/gpuN``) or hosts joined by ``+``."""

    EGRESS = "egress"  # a host's card sending: broadcast from it to a peer, bus bandwidth (GB/s)
    ARRIVAL = "arrival"  # a host's card receiving: a 4-byte broadcast to it, latency (us)
    COMPUTE = "compute"  # one GPU's step of the workload alone (s)
    PAIR = "pair"  # 2-rank allreduce between two hosts, bus bandwidth (GB/s)
    PAIR_LATENCY = "pair_latency"  # the same at 4 bytes, latency (us)
    RING = "ring"  # allreduce over all hosts, bus bandwidth (GB/s); the halves are the bisection's


HIGHER_IS_BETTER = {Probe.EGRESS, Probe.PAIR, Probe.RING}
UNITS = {Probe.EGRESS: "GB/s", Probe.PAIR: "GB/s", Probe.RING: "GB/s", Probe.ARRIVAL: "us",
         Probe.PAIR_LATENCY: "us", Probe.COMPUTE: "s"}
# The least slowdown - 1 judged bad, per probe: a latency of small messages through a loaded kernel wanders
# more than a bandwidth (35 against 12 us between healthy namespace hosts at load 25; a long link adds
# milliseconds: 80x; a fault-free smoke check read 34 us against 5 us, 6.7x, once), a step of sleeps less than either
# (16 emulated GPUs within 0.8% at load 25).
FLOORS = {Probe.EGRESS: 0.25, Probe.PAIR: 0.25, Probe.RING: 0.25, Probe.ARRIVAL: 4.0, Probe.PAIR_LATENCY: 4.0,
          Probe.COMPUTE: 0.1}
SPREAD_FACTOR = 3.0  # a baseline's (or, without one, the peers') relative MAD x this widens the floor
MIN_BASELINE = 2  # earlier healthy figures a baseline needs; fewer: this check's median instead


class Reference(str, Enum):
    BASELINE = "baseline"  # earlier checks of this machine type in the store
    MEDIAN = "median"  # peer-relative: the median of this check's other subjects of the same probe (no baseline)
    NONE = "none"  # nothing to judge against (a lone measurement, no store)


@dataclass(frozen=True)
class Measurement:
    probe: Probe
    subject: str
    value: float  # in UNITS[probe]
    detail: str = ""  # how it was measured (sizes, ranks), for the evidence


@dataclass(frozen=True)
class Verdict:
    measurement: Measurement
    reference: Reference
    expected: float | None  # the reference's figure, in the measurement's unit
    slowdown: float | None  # times worse than expected (1: as expected)
    tolerance: float
    bad: bool

    def evidence(self) -> str:
        m = self.measurement
        unit = UNITS[m.probe]
        if self.expected is None:
            return f"{m.value:.4g} {unit}, no reference"
        return (f"{m.value:.4g} {unit} against {self.expected:.4g} {unit} ({self.reference.value}): "
                f"{self.slowdown:.2f}x worse, bad beyond {1 + self.tolerance:.2f}x")


def slowdown(probe: Probe, value: float, expected: float) -> float:
    """Times worse than ``expected`` (> 1 worse); a zero figure is infinitely worse (or better)."""
    better, worse = (value, expected) if probe in HIGHER_IS_BETTER else (expected, value)
    if better <= 0:
        return float("inf")
    return worse / better


def baseline_figure(history: Sequence[float]) -> tuple[float, float] | None:
    """(median, relative MAD) of a baseline's earlier healthy figures, or None with too few."""
    return spread_figure(history) if len(history) >= MIN_BASELINE else None


def best(probe: Probe, values: Iterable[float]) -> float:
    """The best of a subject's samples: the highest bandwidth, the least time or latency."""
    return (max if probe in HIGHER_IS_BETTER else min)(values)


def combine(measurements: Iterable[Measurement]) -> list[Measurement]:
    """The samples of each (probe, subject) as one measurement, its best (:func:`best`), in first-seen order;
    the detail says how many samples there were where there were more than one."""
    groups: dict[tuple[Probe, str], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault((m.probe, m.subject), []).append(m)
    out = []
    for (probe, subject), samples in groups.items():
        if len(samples) == 1:
            out.append(samples[0])
            continue
        top = best(probe, [m.value for m in samples])
        shown = ", ".join(f"{m.value:.4g}" for m in samples)
        out.append(Measurement(probe, subject, top, f"{samples[0].detail}; best of {len(samples)} samples ({shown})"))
    return out


def judge(measurements: Iterable[Measurement], baselines: dict[Probe, Sequence[float]] | None = None,
          floors: dict[Probe, float] | None = None) -> list[Verdict]:
    """Each subject (its samples combined: :func:`combine`) judged against its probe's baseline (earlier healthy
    figures of this machine type) where there are :data:`MIN_BASELINE` of them, else peer-relative: against the
    median of this check's other subjects of the same probe (the others: of 2 hosts, a slow one is judged
    against the healthy one, not against their mean, which would halve its slowdown), the tolerance the larger
    of the floor and :data:`SPREAD_FACTOR` x the others' relative MAD; one with neither is unjudged (the ring
    over all hosts without a store, a lone host)."""
    found = combine(measurements)
    baselines, floors = baselines or {}, {**FLOORS, **(floors or {})}
    verdicts = []
    for i, m in enumerate(found):
        base = baseline_figure(baselines.get(m.probe, ()))
        peers = [x.value for j, x in enumerate(found) if x.probe == m.probe and j != i]
        if base is None and peers:
            base = spread_figure(peers)
            kind = Reference.MEDIAN
        else:
            kind = Reference.BASELINE
        if base is not None:
            expected, tolerance = base[0], max(floors[m.probe], SPREAD_FACTOR * base[1])
        else:
            verdicts.append(Verdict(m, Reference.NONE, None, None, floors[m.probe], False))
            continue
        worse = slowdown(m.probe, m.value, expected)
        verdicts.append(Verdict(m, kind, expected, worse, tolerance, worse > 1 + tolerance))
    return verdicts


def spread_figure(values: Sequence[float]) -> tuple[float, float]:
    """(median, relative MAD) of any number of figures (one: its own, no spread)."""
    centre = statistics.median(values)
    mad = statistics.median(abs(x - centre) for x in values)
    return centre, (mad / centre if centre > 0 else 0.0)


def suspects(verdicts: Iterable[Verdict]) -> list[Measurement]:
    """The measurements judged bad, as probes to repeat: (probe, subject) once each."""
    return list({(v.measurement.probe, v.measurement.subject): v.measurement for v in verdicts if v.bad}.values())


def confirm(found: Sequence[Measurement], baselines: dict[Probe, Sequence[float]] | None,
            remeasure: Callable[[Measurement], list[Measurement]], repeats: int = 2) -> list[Measurement]:
    """``found`` with each suspect re-probed (``remeasure``: new samples of its probe and subject) up to
    ``repeats`` times, stopping early for a subject as soon as a sample clears it (its best then passes) and
    at once where nothing is bad: a verdict that is clear costs no repeat, one noisy sample accuses no one."""
    samples = list(found)
    for _ in range(repeats):
        wanted = suspects(judge(samples, baselines))
        if not wanted:
            break
        for m in wanted:
            samples += [x for x in remeasure(m) if (x.probe, x.subject) == (m.probe, m.subject)]
    return samples


def margin(verdict: Verdict) -> float:
    """How far beyond its own threshold a verdict lies, in thresholds: log(slowdown) / log(1 + tolerance)
    (1 at the threshold). Probes of unlike noise are ranked by it, not by their slowdowns: a latency 3x its
    median is noise a bandwidth at half its rate is not."""
    if not verdict.slowdown or verdict.slowdown <= 0 or verdict.tolerance <= 0:
        return 0.0
    return math.log(verdict.slowdown) / math.log1p(verdict.tolerance)


OWN = {Probe.EGRESS, Probe.ARRIVAL, Probe.COMPUTE}  # a host's (or its GPU's) own probes


def findings(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """The bad verdicts, furthest beyond their thresholds first (:func:`margin`); a pair or ring after every bad
    own probe of a host in it (a half-rate card slows its pairs as much as itself, and the card says more)."""
    bad = [v for v in verdicts if v.bad]
    own: dict[str, float] = {}
    for v in bad:
        if v.measurement.probe in OWN:
            host = v.measurement.subject.split("/")[0]
            own[host] = max(own.get(host, 0.0), margin(v))

    def rank(v: Verdict) -> tuple[float, int]:
        if v.measurement.probe in OWN:
            return -margin(v), 0
        hosts = [own[h] for h in v.measurement.subject.split("+") if h in own]
        return -min([margin(v), *hosts]), 1
    return sorted(bad, key=rank)


@dataclass(frozen=True)
class Step:
    """One level of the bisection: the two halves' ring figures (GB/s) and the half kept (None: neither)."""

    halves: tuple[tuple[str, ...], tuple[str, ...]]
    figures: tuple[float, float]
    slower: int | None


@dataclass(frozen=True)
class Bisection:
    steps: tuple[Step, ...]
    suspects: tuple[str, ...]  # the hosts left: the slow pair (or three), or the whole where no half is slower
    between_halves: bool = False  # the halves pass alone: what is slow lies between them


def halves(hosts: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    mid = len(hosts) // 2
    return tuple(hosts[:mid]), tuple(hosts[mid:])


def bisect(hosts: Sequence[str], ring_busbw: Callable[[tuple[str, ...]], float], tolerance: float = FLOORS[Probe.RING]
           ) -> Bisection:
    """Halve ``hosts`` while both halves have 2 hosts or more: measure each half's ring (``ring_busbw``, GB/s),
    keep the half slower than the other by more than ``tolerance``, stop where neither is (the halves pass
    alone: the fault lies between them) or where a half of 2 or 3 hosts is left."""
    group, steps = tuple(hosts), []
    while len(group) >= 4:
        pair = halves(group)
        figures = (ring_busbw(pair[0]), ring_busbw(pair[1]))
        worse = slowdown(Probe.RING, min(figures), max(figures))
        slower = figures.index(min(figures)) if worse > 1 + tolerance else None
        steps.append(Step(pair, figures, slower))
        if slower is None:
            return Bisection(tuple(steps), group, between_halves=True)
        group = pair[slower]
    return Bisection(tuple(steps), group)

