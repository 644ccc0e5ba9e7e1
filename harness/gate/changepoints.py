"""Change points in one series of sweeps: levels, steps, outliers and drift, as the gate's record holds them.

A series is one configuration on one machine (:mod:`harness.gate.history` builds them). Each sweep brings
a few launches; each launch's figure is its throughput from the step-time distribution (global batch / the
mean step time with the slowest tenth of steps left out: occasional slow steps are noise, a stall in a
larger share of steps is not). The analysis works on the logarithm of those figures, so that changes are
fractions and lognormal launch-to-launch noise is symmetric:

1. **the sweep's figure and its noise** (:mod:`harness.results.launches`): launches and sweeps as two levels
   of noise, slowed launches (a neighbour on a shared runner) modelled as a slow mode of the launches
   rather than averaged in;
2. **the record** (:mod:`harness.gate.sequential`): one pass over the sweeps in time order, each sweep
   judged once against the level before it: suspected, then confirmed as a step or a trend, or withdrawn
   (an outlier); an accepted sweep starts a new level. What the pass said at sweep n is what a CI run on
   the store after sweep n says, and a confirmed step stays in every later report;
3. **the description**: the record's levels and trends refitted on every sweep they hold (the figures of
   the newest model), its steps as confirmed, the open suspicion, the outliers, the power (the minimum
   detectable effect).

Why this method: benchmarks/changepoints.py replays histories sweep by sweep beside Apache Otava on the
same data; docs/reports.md gives the figures.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Sequence

from harness.gate import sequential
from harness.gate.sequential import ACCEPTED, CONFIRMED, DOWN, SUSPECTED, UP, WITHDRAWN  # noqa: F401 - the API

SLOW_TAIL = 0.1  # share of a launch's slowest steps left out of its figure


@dataclass(frozen=True)
class Settings:
    alpha: float = 0.01  # the newest sweeps' test; steps and trends are confirmed at alpha / 10
    floor: float = 0.03  # the smallest change reported, a fraction of throughput

    def __post_init__(self) -> None:
        from harness.base.errors import UserError

        if not (isinstance(self.alpha, (int, float)) and 0 < self.alpha < 1):
            raise UserError(f"--alpha: a significance level between 0 and 1 (exclusive), got {self.alpha}")
        if not (isinstance(self.floor, (int, float)) and 0 <= self.floor < 1):
            raise UserError(f"--floor: a fraction of throughput from 0 to below 1, got {self.floor}")

    @property
    def confirm_alpha(self) -> float:
        return self.alpha / 10


@dataclass(frozen=True)
class Level:
    """Sweeps ``start`` to ``stop`` (indexes into the series, stop exclusive) at one level or on one trend."""

    start: int
    stop: int
    rate: float  # samples/s at the level's first sweep (the fitted value)
    end_rate: float  # samples/s at its last sweep (differs from rate on a trend)
    slope: float = 0.0  # fraction of throughput per sweep (0 for a flat level)
    p_value: float = math.nan  # of the slope, for a trend


@dataclass(frozen=True)
class Change:
    """A step between two levels, starting at sweep ``index``."""

    index: int
    direction: str  # DOWN (slower) or UP (faster: a recovery is a step up)
    change: float  # fraction of throughput, new level / old level - 1
    before: float  # samples/s
    after: float  # samples/s
    p_value: float
    verdict: str  # SUSPECTED (open), CONFIRMED or ACCEPTED (a team's mark)
    decided: int = -1  # the sweep whose run confirmed or accepted it (a suspicion: the newest)
    drift: int | None = None  # the first sweep of the drift this step continues (None: a change of its own)
    note: str = ""  # an acceptance's reason


@dataclass(frozen=True)
class Withdrawn:
    """A suspicion the later sweeps did not hold."""

    index: int  # its first sweep
    decided: int  # the sweep that withdrew it
    reason: str


@dataclass(frozen=True)
class Analysis:
    """Everything the detector says about one series (indexes are positions in the input)."""

    rates: tuple[float, ...]  # per sweep, samples/s (its figure); NaN: not judged
    fitted: tuple[float, ...]  # per sweep, the level or trend at it (samples/s); NaN: not judged
    noise: float  # one sweep's figure's standard deviation, a fraction
    levels: tuple[Level, ...] = ()
    changes: tuple[Change, ...] = ()  # confirmed and accepted, in time order
    outliers: tuple[int, ...] = ()
    newest: Change | None = None  # the open suspicion (its first sweep to the newest), if any
    reading: sequential.Reading | None = None  # what the newest sweep's run decides
    withdrawn: tuple[Withdrawn, ...] = ()
    mde: float = math.nan  # the smallest step confirmed with 80% power from 3 sweeps (a fraction)
    slowed: tuple[float, ...] = ()  # per sweep, the expected number of its launches in the slow mode
    slowed_share: float = 0.0  # the share of launches in the slow mode (0: none modelled)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def trends(self) -> tuple[Level, ...]:
        return tuple(level for level in self.levels if level.slope)


def launch_rate(step_times_s: Sequence[float], global_batch: float) -> float:
    """samples/s of one launch: global batch / mean step time (s) without its slowest ``SLOW_TAIL``."""
    steps = sorted(t for t in map(float, step_times_s) if 0 < t < math.inf)
    if not steps:
        return math.nan
    kept = steps[:len(steps) - int(math.ceil(SLOW_TAIL * len(steps)))] if len(steps) >= 5 else steps
    return global_batch / (sum(kept) / len(kept))


def replay(launches: Sequence[Sequence[float]], settings: Settings = Settings(),
           judged: Sequence[bool] | None = None, accepted: dict[int, str] | None = None,
           names: Sequence[str] | None = None) -> sequential.Pass:
    """The gate's pass over the sweeps (``launches``: per sweep its launches' samples/s; ``judged``: False
    leaves a sweep out; ``accepted``: sweep index -> why it is the new normal). ``.readings[n]`` is what a
    CI run on the first n + 1 sweeps decides; ``names``: the sweeps' ids, for its notes."""
    judged = list(judged) if judged is not None else [True] * len(launches)
    accepted = accepted or {}
    gate = sequential.Pass(settings.alpha, settings.floor)
    for i, rates in enumerate(launches):
        logs = [math.log(r) for r in rates if math.isfinite(r) and r > 0]
        gate.add(logs, judged[i], accepted.get(i), names[i] if names else "")
    return gate


def analyse(launches: Sequence[Sequence[float]], settings: Settings = Settings(),
            judged: Sequence[bool] | None = None, accepted: dict[int, str] | None = None,
            names: Sequence[str] | None = None) -> Analysis:
    """Levels, steps, outliers, trends and the newest sweep's reading of one series (see :func:`replay`)."""
    return describe(replay(launches, settings, judged, accepted, names), len(launches))


def describe(gate: sequential.Pass, n: int) -> Analysis:
    """The record of a pass as levels on the newest figures, its steps, suspicion and outliers. A drift's
    stairs are drawn as one trend: a line over their sweeps."""
    y, var = gate.y, gate.var
    rates = tuple(math.exp(y[i]) if i in y else math.nan for i in range(n))
    reading = gate.readings[-1] if gate.readings else None
    if gate.figures is None or len(gate.judged) <= sequential.MIN_BASE:
        notes = (reading.note,) if reading and reading.note else ()
        return Analysis(rates=rates, fitted=rates, noise=math.nan, reading=reading, notes=notes)
    fitted, levels = [math.nan] * n, []
    end = gate.pending.start if gate.pending else n
    for k, group in enumerate(_groups(gate)):
        members = [i for seg in group for i in seg.members]
        if not members:
            continue
        trend = len(group) > 1
        a, b, x0 = _line(members, y) if trend else (sequential.level_of(members, var, y)[0], 0.0, 0.0)
        start, last = group[0].start, members[-1]
        for i in range(start, n):
            if i in y and (i <= last or k == len(_groups(gate)) - 1):
                fitted[i] = math.exp(a + b * (i - x0))
        stop = max(last + 1, min(end, n)) if k == len(_groups(gate)) - 1 else last + 1
        p = _slope_p(members, y, gate.figures.sigma(), gate.dof) if trend else math.nan
        levels.append(Level(start=start, stop=stop, rate=math.exp(a + b * (start - x0)),
                            end_rate=math.exp(a + b * (stop - 1 - x0)), slope=math.expm1(b), p_value=p))
    changes = tuple(Change(index=s.index, direction=s.direction, change=s.change, before=math.exp(s.before),
                           after=math.exp(s.after), p_value=s.p_value, verdict=s.kind, decided=s.decided,
                           drift=s.drift, note=s.note) for s in gate.steps)
    newest = None
    if gate.pending is not None and reading is not None and math.isfinite(reading.change):
        before = rates[reading.index] / (1 + reading.change)
        newest = Change(index=gate.pending.start, direction=gate.pending.direction, change=reading.step_change,
                        before=before, after=before * (1 + reading.step_change), p_value=reading.step_p,
                        verdict=SUSPECTED, decided=reading.index)
    typical = statistics.median(len(lr) for lr in gate.logs)
    slowed = dict(zip(gate.judged, gate.figures.slowed))
    return Analysis(
        rates=rates, fitted=tuple(fitted), noise=math.expm1(gate.figures.sigma(typical)), levels=tuple(levels),
        changes=changes, outliers=tuple(sorted(gate.outliers)), newest=newest, reading=reading,
        withdrawn=tuple(Withdrawn(w.index, w.decided, w.reason) for w in gate.withdrawals), mde=gate.mde(),
        slowed=tuple(slowed.get(i, 0.0) for i in range(n)), slowed_share=gate.figures.model.slowed_share)


def _groups(gate: sequential.Pass) -> list[list[sequential.Segment]]:
    """The record's levels, a drift's stairs (each step continuing the drift before it) as one group."""
    continues = {s.index for s in gate.steps if s.drift is not None}
    groups: list[list[sequential.Segment]] = []
    for seg in gate.segments:
        if groups and seg.start in continues:
            groups[-1].append(seg)
        else:
            groups.append([seg])
    return groups


def _line(members: Sequence[int], y: dict[int, float]) -> tuple[float, float, float]:
    """(value at x0, slope, x0) of the least-squares line through the sweeps' figures (log units)."""
    x0 = statistics.fmean(members)
    a = statistics.fmean(y[i] for i in members)
    sxx = sum((i - x0) ** 2 for i in members)
    b = sum((i - x0) * (y[i] - a) for i in members) / sxx if sxx else 0.0
    return a, b, x0


def _slope_p(members: Sequence[int], y: dict[int, float], sigma: float, dof: float) -> float:
    _, b, x0 = _line(members, y)
    spread = math.sqrt(sum((i - x0) ** 2 for i in members))
    return sequential.two_sided_p(b * spread / sigma, dof) if sigma > 0 and spread > 0 else math.nan
