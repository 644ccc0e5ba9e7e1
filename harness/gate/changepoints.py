"""Change points in one series of sweeps: levels, steps, outliers and drift, from every launch's figure.

A series is one configuration on one machine (:mod:`harness.gate.history` builds them). Each sweep
brings a few launches; each launch's figure is its throughput from the step-time distribution (global
batch / the mean step time with the slowest tenth of steps left out: occasional slow steps are noise,
a stall in a larger share of steps is not). The analysis works on the logarithm of those figures, so
that changes are fractions and lognormal launch-to-launch noise is symmetric:

1. **the sweep's figure**: the median of its launches' figures (one launch slowed by other load is
   ignored); comparable between a window of 2 sweeps and one of 30 (the old rule scored a level by its fastest launch among many against a sweep's fastest
   of 3, which drifted past the noise floor with no change at all);
2. **noise**: the larger of the launches' spread within sweeps (median absolute difference of two
   launches of one sweep, scaled to a median of the sweep's launches) and the spread of successive
   sweeps' figures (median absolute difference, robust to a few steps and outliers), so that noise
   common to a whole sweep counts too;
3. **outliers**: a sweep away from the median of the sweeps before it and of those after it, in the same
   direction, by more than the change points' bar, with those two medians close: one sweep off and back;
4. **steps**: PELT (``ruptures``' KernelCPD with the linear kernel: a penalised least-squares fit of
   levels, each change costing ``PENALTY`` x noise^2 x log n) with at least two sweeps per level, then the merge step of Hunter/Otava
   (Fleming et al. 2023): the weakest change is dropped while its two levels are not significantly
   different (``alpha / 10``) or differ by less than ``floor``;
5. **drift**: consecutive steps in one direction that a straight line fits as well (penalised the same
   way) are one trend, reported with its slope; so is a long level whose slope is significant;
6. **the newest sweeps**: the last 1, 2 or 3 sweeps against their level without them, a two-sided z
   test at ``alpha`` (split between the three) and at least ``floor``: a *suspected* change at once,
   *confirmed* when later sweeps make it a step, *withdrawn* (an outlier) when they come back.

Why PELT and these settings: benchmarks/changepoints.py measures them against Apache Otava (E-divisive)
on the same synthetic histories; docs/reports.md gives the figures.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Sequence

import numpy as np

PENALTY = 3.0  # PELT's cost of one change, in noise^2 x log(sweeps) (BIC is 2)
MIN_LEVEL = 2  # sweeps a level needs before a step to it is confirmed
OUTLIER_WINDOW = 4  # sweeps on each side an outlier is judged against
TREND_MIN = 8  # sweeps a level needs before its own slope is tested
TRAIL = 3  # the newest sweeps tested together against their level (1, 2, 3)
SLOW_TAIL = 0.1  # share of a launch's slowest steps left out of its figure

SUSPECTED, CONFIRMED = "suspected", "confirmed"  # a withdrawn suspicion is an outlier
DOWN, UP = "down", "up"


@dataclass(frozen=True)
class Settings:
    alpha: float = 0.01  # the newest sweep's z test; change points and trends are held to alpha / 10
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
    verdict: str  # SUSPECTED (the newest sweep alone) or CONFIRMED


@dataclass(frozen=True)
class Analysis:
    """Everything the detector says about one series (indexes are positions in the input)."""

    rates: tuple[float, ...]  # per sweep, samples/s (geometric mean of its launches); NaN: not judged
    fitted: tuple[float, ...]  # per sweep, the level or trend at it (samples/s); NaN: not judged
    noise: float  # one sweep's figure's standard deviation, a fraction
    levels: tuple[Level, ...] = ()
    changes: tuple[Change, ...] = ()
    outliers: tuple[int, ...] = ()
    newest: Change | None = None  # the newest sweep's own verdict, when it departs from its level
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


def analyse(launches: Sequence[Sequence[float]], settings: Settings = Settings(),
            judged: Sequence[bool] | None = None) -> Analysis:
    """Levels, steps, outliers, trends and the newest sweep's verdict of one series.

    ``launches``: per sweep in time order, each launch's samples/s (empty: nothing measured);
    ``judged``: per sweep, False to leave it out (e.g. measured on a busy machine).
    """
    judged = list(judged) if judged is not None else [True] * len(launches)
    logs = [[math.log(r) for r in rs if math.isfinite(r) and r > 0] for rs in launches]
    use = [i for i, lr in enumerate(logs) if len(lr) and judged[i]]
    y = {i: statistics.median(logs[i]) for i in use}
    rates = tuple(math.exp(y[i]) if i in y else math.nan for i in range(len(launches)))
    if len(use) < 3:
        return Analysis(rates=rates, fitted=rates, noise=math.nan,
                        notes=(f"{len(use)} sweeps measured: too few to judge (3 needed)",))
    sigma = _noise([logs[i] for i in use], [y[i] for i in use])
    newest = use[-1]
    outliers = _outliers(use, y, sigma, settings)
    core = [i for i in use if i not in outliers]
    levels = _segments(core, y, sigma, settings)
    levels = _trends(levels, y, sigma, settings)
    changes = _changes(levels, y, sigma, settings)
    fitted = [math.nan] * len(launches)
    for seg in levels:
        line = _fit(seg, y)
        for i in range(seg[0], seg[-1] + 1):
            if i in y:
                fitted[i] = math.exp(line(i))
    verdict = _newest(levels, newest, changes, y, sigma, settings)
    return Analysis(rates=rates, fitted=tuple(fitted), noise=math.expm1(sigma),
                    levels=tuple(_level(seg, y, sigma) for seg in levels), changes=tuple(changes),
                    outliers=tuple(outliers), newest=verdict)


# ---------------------------------------------------------------- steps of the analysis


def _noise(launch_logs: list[list[float]], y: list[float]) -> float:
    """One sweep's figure's standard deviation (log units): from launches of the same sweep or from
    successive sweeps, whichever is larger; both robust (medians of absolute differences), since a
    launch with several slow steps or one odd sweep must not widen the noise for all."""
    pairs = [abs(a - b) for lr in launch_logs for k, a in enumerate(lr) for b in lr[k + 1:]]
    sizes = statistics.fmean([len(lr) for lr in launch_logs])
    # a pair's difference has twice a launch's variance; a median of n has about pi/2 times a mean's
    per_launch = 1.4826 * statistics.median(pairs) / math.sqrt(2) if len(pairs) >= 3 else 0.0
    from_launches = per_launch * math.sqrt(math.pi / 2 / sizes)
    diffs = np.abs(np.diff(y))
    from_sweeps = 1.4826 * float(np.median(diffs)) / math.sqrt(2) if len(diffs) >= 4 else 0.0
    return max(from_launches, from_sweeps, 1e-6)


def _z(alpha: float) -> float:
    return NormalDist().inv_cdf(1 - alpha / 2)


def _p(z: float) -> float:
    return 2 * (1 - NormalDist().cdf(abs(z)))


def _outliers(use: list[int], y: dict[int, float], sigma: float, settings: Settings) -> list[int]:
    """Sweeps off the sweeps on both sides in the same direction, those sides agreeing (never the newest)."""
    bar = max(_z(settings.confirm_alpha) * sigma, math.log1p(settings.floor))
    found = []
    for k in range(1, len(use) - 1):
        left = [y[i] for i in use[max(0, k - OUTLIER_WINDOW):k]]
        right = [y[i] for i in use[k + 1:k + 1 + OUTLIER_WINDOW]]
        a, b, v = statistics.median(left), statistics.median(right), y[use[k]]
        if (v - a) * (v - b) > 0 and min(abs(v - a), abs(v - b)) > bar and abs(a - b) < min(abs(v - a), abs(v - b)) / 2:
            found.append(use[k])
    return found


def _segments(core: list[int], y: dict[int, float], sigma: float, settings: Settings) -> list[list[int]]:
    """Levels as lists of sweep indexes: PELT's fit, then the merge step."""
    import ruptures

    signal = np.array([y[i] for i in core])
    if len(core) >= 2 * MIN_LEVEL:
        # PELT on the least-squares cost: KernelCPD with the linear kernel is that cost, in C
        bounds = ruptures.KernelCPD(kernel="linear", min_size=MIN_LEVEL).fit(signal).predict(
            pen=PENALTY * sigma ** 2 * math.log(len(core)))
    else:
        bounds = [len(core)]
    segments = [core[a:b] for a, b in zip([0] + bounds[:-1], bounds)]
    while len(segments) > 1:  # drop the weakest change while it is not significant or below the floor
        tests = [_step_test(segments[k], segments[k + 1], y, sigma) for k in range(len(segments) - 1)]
        weak = [(p, k) for k, (change, p) in enumerate(tests)
                if p >= settings.confirm_alpha or abs(change) < settings.floor
                or not _holds(segments[k], segments[k + 1], y)]
        if not weak:
            break
        _, k = max(weak)
        segments[k:k + 2] = [segments[k] + segments[k + 1]]
    return segments


def _holds(old: list[int], new: list[int], y: dict[int, float]) -> bool:
    """A new level of few sweeps holds when each of them is nearer it than the old level (else one
    departing sweep and one at the old level would make a "level" of two)."""
    if len(new) >= 2 * MIN_LEVEL:
        return True
    a, b = statistics.fmean([y[i] for i in old]), statistics.fmean([y[i] for i in new])
    return all(abs(y[i] - b) < abs(y[i] - a) for i in new)


def _step_test(a: list[int], b: list[int], y: dict[int, float], sigma: float) -> tuple[float, float]:
    """(change as a fraction, two-sided p) between two flat levels, noise known."""
    ma, mb = statistics.fmean([y[i] for i in a]), statistics.fmean([y[i] for i in b])
    z = (mb - ma) / (sigma * math.sqrt(1 / len(a) + 1 / len(b)))
    return math.expm1(mb - ma), _p(z)


def _fit(seg: list[int], y: dict[int, float], trend: bool | None = None):
    """The level's line (a function of the sweep index, log units): flat, or sloped for a trend."""
    xs = np.array(seg, dtype=float)
    ys = np.array([y[i] for i in seg])
    sloped = getattr(seg, "trend", False) if trend is None else trend
    if sloped and len(seg) >= 3:
        slope, icept = np.polyfit(xs, ys, 1)
        return lambda i: float(icept + slope * i)
    mean = float(ys.mean())
    return lambda i: mean


class _Trend(list):
    """A segment whose level moves along a line."""

    trend = True


def _rss(seg: list[int], y: dict[int, float], trend: bool) -> float:
    line = _fit(seg, y, trend)
    return float(sum((y[i] - line(i)) ** 2 for i in seg))


def _slope_p(seg: list[int], y: dict[int, float], sigma: float) -> tuple[float, float]:
    """(slope in log units per sweep, its two-sided p with the noise known)."""
    xs = np.array(seg, dtype=float)
    slope = float(np.polyfit(xs, [y[i] for i in seg], 1)[0])
    spread = math.sqrt(float(((xs - xs.mean()) ** 2).sum()))
    return slope, _p(slope * spread / sigma)


def _trends(segments: list[list[int]], y: dict[int, float], sigma: float, settings: Settings) -> list[list[int]]:
    """Runs of steps in one direction that one line fits about as well become a trend (a least-cost
    grouping: a line costs one change's penalty, so one step stays a step unless a line fits it better);
    a long level whose own slope is significant becomes a trend too."""
    n = sum(len(s) for s in segments)
    pen = PENALTY * sigma ** 2 * math.log(max(n, 2))
    means = [statistics.fmean([y[i] for i in s]) for s in segments]
    best: list[tuple[float, list[list[int]]]] = [(0.0, [])]  # best[k]: cost and grouping of segments[:k]
    for k in range(1, len(segments) + 1):
        options = [(best[k - 1][0] + _rss(segments[k - 1], y, False) + pen, best[k - 1][1] + [segments[k - 1]])]
        for j in range(k - 2, -1, -1):  # segments[j:k] as one trend, if their levels move one way
            steps = np.sign(np.diff(means[j:k]))
            if not (np.all(steps > 0) or np.all(steps < 0)):
                break
            span = _Trend(i for s in segments[j:k] for i in s)
            options.append((best[j][0] + _rss(span, y, True) + 2 * pen, best[j][1] + [span]))
        best.append(min(options, key=lambda o: o[0]))
    final: list[list[int]] = []
    for seg in best[-1][1]:
        if len(seg) >= (3 if isinstance(seg, _Trend) else TREND_MIN):
            slope, p = _slope_p(seg, y, sigma)
            total = math.expm1(abs(slope) * (seg[-1] - seg[0]))
            if p < settings.confirm_alpha and total >= settings.floor:
                final.append(_Trend(seg))
                continue
        final.append(list(seg))
    return _merge_flat(final, y, sigma, settings)


def _merge_flat(segments: list[list[int]], y, sigma: float, settings: Settings) -> list[list[int]]:
    """Adjacent flat levels that a trend's removal left without a significant step between them, joined."""
    out: list[list[int]] = []
    for seg in segments:
        if out and not isinstance(seg, _Trend) and not isinstance(out[-1], _Trend):
            change, p = _step_test(out[-1], seg, y, sigma)
            if p >= settings.confirm_alpha or abs(change) < settings.floor:
                out[-1] = out[-1] + list(seg)
                continue
        out.append(seg)
    return out


def _changes(segments: list[list[int]], y, sigma: float, settings: Settings) -> list[Change]:
    """The step at the start of each level after the first (between a trend and a level too)."""
    out = []
    for a, b in zip(segments, segments[1:]):
        before, after = _fit(a, y)(a[-1]), _fit(b, y)(b[0])
        change = math.expm1(after - before)
        tail = a[-min(len(a), 4):] if isinstance(a, _Trend) else a
        head = b[:min(len(b), 4)] if isinstance(b, _Trend) else b
        _, p = _step_test(tail, head, y, sigma)
        if abs(change) < settings.floor:
            continue
        out.append(Change(index=b[0], direction=UP if change > 0 else DOWN, change=change,
                          before=math.exp(before), after=math.exp(after), p_value=p, verdict=CONFIRMED))
    return out


def _newest(segments: list[list[int]], newest: int, changes: list[Change], y, sigma: float,
            settings: Settings) -> Change | None:
    """The newest sweeps against their level without them: a suspected change, or None.

    The last 1, 2 and 3 sweeps are each tested (at ``alpha / TRAIL`` each, so that together they keep
    ``alpha``), every one of them on the same side of the level: one sweep 10% off is suspected at once,
    two 5% off the next sweep, before a step can be confirmed."""
    if any(c.index == newest for c in changes):
        return None
    last = segments[-1]
    best = None
    for k in range(1, TRAIL + 1):
        tail, rest = last[-k:], last[:-k]
        if len(rest) < 3 or tail[-1] != newest:
            break
        line = _fit(_Trend(rest) if isinstance(last, _Trend) else rest, y)
        gaps = [y[i] - line(i) for i in tail]
        gap = statistics.fmean(gaps)
        if not all(g * gap > 0 for g in gaps):
            continue
        z = gap / (sigma * math.sqrt(1 / k + 1 / len(rest)))
        if abs(z) >= _z(settings.alpha / TRAIL) and abs(math.expm1(gap)) >= settings.floor and (
                best is None or abs(z) > abs(best[0])):
            expected = statistics.fmean([line(i) for i in tail])
            best = (z, tail[0], expected, expected + gap)
    if best is None:
        return None
    z, index, before, after = best
    change = math.expm1(after - before)
    return Change(index=index, direction=UP if change > 0 else DOWN, change=change, before=math.exp(before),
                  after=math.exp(after), p_value=_p(z), verdict=SUSPECTED)


def _level(seg: list[int], y, sigma: float) -> Level:
    line = _fit(seg, y)
    if isinstance(seg, _Trend):
        slope, p = _slope_p(seg, y, sigma)
        return Level(start=seg[0], stop=seg[-1] + 1, rate=math.exp(line(seg[0])), end_rate=math.exp(line(seg[-1])),
                     slope=math.expm1(slope), p_value=p)
    return Level(start=seg[0], stop=seg[-1] + 1, rate=math.exp(line(seg[0])), end_rate=math.exp(line(seg[-1])))
