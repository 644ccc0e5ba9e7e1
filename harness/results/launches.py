"""A series' launches as evidence: each sweep's figure and its variance, with slowed launches modelled.

Each sweep of a series brings a few launches (their figures: :func:`harness.gate.changepoints.launch_rate`,
in log units here). Two levels of noise move them (a random-effects model): each launch's own (``s``:
scheduling, caches, a neighbour's burst) and the sweep's common part (``tau``: what the machine was like
that hour). A sweep's figure is the mean of its launches' logs, with variance ``tau^2 + s^2 / n``.

On a shared runner some launches are slowed as a whole (a neighbour took the cores for a while): the
launches' figures are then a mixture of a clean mode and a slow one, ``d`` slower, in a share ``pi`` of
launches. Averaged in, two slowed launches of three move a sweep's figure by most of ``d``; dropped by a
robust estimate of the noise, they make the sweeps where they bunch look like changes. So the mixture is
fitted (EM over every launch of the series: each launch's chance of being slowed, ``pi``, ``d``, ``s``),
each launch enters its sweep's figure corrected by its expected slowdown, and a slowed launch counts
less (its correction is only as good as ``d``'s estimate). The slow mode is kept only when it stands
apart from the clean one (``d`` at least ``SEPARATION`` launch noises) and holds enough launches; else
every launch counts as it is and the launches' spread is what it is, slowed launches included (honest
noise: the tests are then wider, never blind to the mixture).

Launches measured on a busy machine (``machine_busy``) never get here: :mod:`harness.gate.history` leaves
them out at the source. Pure computation: a series' launches are added sweep by sweep (:class:`Launches`, so
that the gate's pass over 40 sweeps does not redo the launches' pairs 40 times); numpy for the mixture.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

SEPARATION = 3.0  # the slow mode is modelled when it lies this many launch noises below the clean one
CANDIDATE = 3.0  # a launch this many pair noises below its sweep's fastest is a candidate for the slow mode
MIN_SLOWED = 3  # launches the slow mode needs (fewer: every launch counts as it is)
_NORMAL = NormalDist()
_NEAR = 0.9969  # the median of |X| cut at 3 of its standard deviations, against that of all |X| (X normal)
ITERATIONS = 40  # at most, of EM (it stops once the launch noise moves by less than 0.01%)


@dataclass(frozen=True)
class Model:
    """What the launches of a series say about its noise (log units)."""

    s: float  # one launch's noise (standard deviation) about its sweep's figure; NaN: no sweep has 2 launches
    tau: float  # the sweep-common noise
    slowed_share: float = 0.0  # pi: the share of launches in the slow mode (0: no slow mode)
    slowdown: float = 0.0  # d: how much slower the slow mode is (log units)
    dof: float = 1.0  # degrees of freedom of the noise estimate (for Student's t)


@dataclass(frozen=True)
class Figures:
    """Each sweep's figure (log samples/s) and its variance, with the model they came from."""

    y: tuple[float, ...]
    var: tuple[float, ...]
    slowed: tuple[float, ...]  # per sweep, the expected number of its launches in the slow mode
    model: Model

    def sigma(self, n: float = 3.0) -> float:
        """One sweep's figure's standard deviation with ``n`` launches (log units)."""
        s = self.model.s if math.isfinite(self.model.s) else 0.0
        return math.sqrt(self.model.tau ** 2 + s ** 2 / max(n, 1.0))


class Launches:
    """A series' launches so far, sweep by sweep, and the figures they give."""

    def __init__(self) -> None:
        self.logs: list[list[float]] = []  # per sweep, its launches' log rates (non-empty)
        self.pairs: list[float] = []  # sorted |differences| of two launches of one sweep
        self.model: Model | None = None

    def add(self, launch_logs: Sequence[float]) -> Figures:
        logs = list(launch_logs)
        self.logs.append(logs)
        for i, a in enumerate(logs):
            for b in logs[i + 1:]:
                bisect.insort(self.pairs, abs(a - b))
        figures = self._figures()
        self.model = figures.model
        return figures

    def _pair_noise(self) -> float:
        """One launch's noise from the differences of launches of one sweep: robust (a median, of the pairs
        whose launches are not far apart: a slowed launch's pairs would widen it by a third), so that the
        slowed launches do not widen it."""
        if len(self.pairs) < 3:
            return math.nan
        first = 1.4826 * statistics.median(self.pairs) / math.sqrt(2)
        near = self.pairs[:bisect.bisect_right(self.pairs, CANDIDATE * first * math.sqrt(2))]
        return 1.4826 * statistics.median(near) / math.sqrt(2) / _NEAR if len(near) >= 3 else first

    def _figures(self) -> Figures:
        pair = self._pair_noise()
        slowed = [[0.0] * len(lr) for lr in self.logs]
        if math.isfinite(pair) and pair > 0:
            bar = CANDIDATE * pair * math.sqrt(2)
            slowed = [[1.0 if max(lr) - x > bar else 0.0 for x in lr] for lr in self.logs]
        mixture = _mixture(self.logs, slowed, pair) if sum(map(sum, slowed)) >= MIN_SLOWED else None
        if mixture is not None:
            mu, slowed, s, pi, d = mixture
            total = sum(map(sum, slowed))
            worth = total / (total + 1.0)
            n_eff = [max(sum((1 - w) + w * worth for w in ws), 0.5) for ws in slowed]
        else:
            pi = d = 0.0
            kept = [[x for x, w in zip(lr, ws) if not w] for lr, ws in zip(self.logs, slowed)]
            mu = [sum(k) / len(k) for k in kept]
            n_eff = [float(len(k)) for k in kept]
            within = sum(n_eff) - len(kept)
            s = math.sqrt(sum((x - m) ** 2 for k, m in zip(kept, mu) for x in k) / within) if within > 0 else math.nan
        return _two_levels(mu, n_eff, s, pi, d, [sum(ws) for ws in slowed])


def _two_levels(mu, n_eff, s, pi, d, slowed) -> Figures:
    """The sweeps' figures with their variance: the launches' part, and the sweep-common part the
    successive sweeps show beyond it."""
    from_launches = [s ** 2 / n for n in n_eff] if math.isfinite(s) else [0.0] * len(mu)
    diffs = [abs(b - a) for a, b in zip(mu, mu[1:])]
    between = _between(diffs)
    launch_part = sum(from_launches) / len(from_launches)
    # the sweep-common part where the sweeps show one: beyond the launches' part by a standard error of its
    # estimate (cut at zero, an estimate as noisy as this one would add a tenth to the noise of every series)
    margin = between * math.sqrt(2 / max(0.7 * len(diffs), 1.0)) if diffs else 0.0
    tau2 = max(0.0, between - launch_part - margin)
    # Student's t for the tests: Satterthwaite's degrees of freedom of the two parts (the launches' from the
    # launches within sweeps; the sweeps' from their differences, a trimmed mean of squares: about 70% of them)
    within = max(sum(n_eff) - len(n_eff), 1.0) if math.isfinite(s) else 0.0
    across = max(0.7 * len(diffs), 1.0)
    if not within:
        dof = across
    elif tau2 <= 0:
        dof = within
    else:
        dof = (launch_part + tau2) ** 2 / (launch_part ** 2 / within + tau2 ** 2 / across)
    return Figures(y=tuple(mu), var=tuple(max(v + tau2, 1e-12) for v in from_launches), slowed=tuple(slowed),
                   model=Model(s=s, tau=math.sqrt(tau2), slowed_share=pi, slowdown=d, dof=dof))


def figures(launch_logs: Sequence[Sequence[float]]) -> Figures:
    """The figures of sweeps given as lists of their launches' log rates (each list non-empty)."""
    launches = Launches()
    result = None
    for logs in launch_logs:
        result = launches.add(logs)
    return result


TRIM = 0.1  # the largest successive differences left out of the between-sweep variance (steps, outliers)


def _between(diffs: list[float]) -> float:
    """A sweep figure's variance from successive sweeps' differences (half their mean square), the largest
    tenth left out, and at least two (one outlier sweep makes two large differences), so that steps and
    outliers do not widen it; more efficient than a median (used before), whose noise, cut at zero, made the
    sweep-common part look larger than it is. The mean square of the rest is corrected to a normal's."""
    if len(diffs) < 4:
        return 0.0
    drop = max(2, int(math.ceil(TRIM * len(diffs))))
    kept = sorted(diffs)[:len(diffs) - drop]
    share = len(kept) / len(diffs)
    q = _NORMAL.inv_cdf((1 + share) / 2)
    truncated = 1 - 2 * q * _NORMAL.pdf(q) / share  # E[X^2 | |X| < q] for a standard normal X
    return sum(x * x for x in kept) / len(kept) / truncated / 2


def _mixture(logs: list[list[float]], candidates: list[list[float]], pair: float):
    """EM for the clean and slow modes: (sweep figures, each launch's weight as slowed, s, pi, d), or None
    when the launches hold no slow mode that stands apart (``SEPARATION``) with ``MIN_SLOWED`` launches."""
    r = np.fromiter((x for lr in logs for x in lr), float)
    n = np.array([len(lr) for lr in logs], dtype=float)
    g = np.repeat(np.arange(len(logs)), n.astype(int))
    T = len(n)
    cand = np.fromiter((w for ws in candidates for w in ws), float) > 0
    if cand.sum() < MIN_SLOWED or not (math.isfinite(pair) and pair > 0):
        return None
    # started afresh from the candidates every time (a previous prefix's fit, once off, kept EM off too)
    keep = ~cand
    mu = np.bincount(g, r * keep, minlength=T) / np.maximum(np.bincount(g, keep, minlength=T), 1)
    pi, d, s = float(cand.mean()), float(np.median((mu[g] - r)[cand])), pair
    for _ in range(ITERATIONS):
        w = _posterior(r, g, mu, s, pi, d)
        mu = np.bincount(g, r + w * d, minlength=T) / n
        total = float(w.sum())
        if total < 0.5:
            return None
        d = float((w * (mu[g] - r)).sum() / total)
        pi = total / len(r)
        resid = (1 - w) * (r - mu[g]) ** 2 + w * (r + d - mu[g]) ** 2
        s_new = math.sqrt(float(resid.sum()) / max(len(r) - T, 1))
        if s_new <= 0 or d < SEPARATION * max(s_new, pair):
            return None
        converged = abs(s_new - s) < 1e-4 * s
        s = s_new
        if converged:
            break
    w = _posterior(r, g, mu, s, pi, d)
    # a slow mode stands apart from the clean one by the robust launch noise too (EM's own s shrinks as the
    # clean mode's lower tail is taken for slowed launches), and holds a few launches
    if d < SEPARATION * max(s, pair) or float(w.sum()) < MIN_SLOWED:
        return None
    mu = np.bincount(g, r + w * d, minlength=T) / n
    starts = np.concatenate([[0], np.cumsum(n.astype(int))])
    weights = [list(map(float, w[a:b])) for a, b in zip(starts[:-1], starts[1:])]
    return list(map(float, mu)), weights, s, pi, d


def _posterior(r, g, mu, s, pi, d) -> np.ndarray:
    """Each launch's chance of being in the slow mode."""
    clean = -0.5 * ((r - mu[g]) / s) ** 2 + math.log(max(1 - pi, 1e-12))
    slow = -0.5 * ((r + d - mu[g]) / s) ** 2 + math.log(max(pi, 1e-12))
    return 1.0 / (1.0 + np.exp(np.clip(clean - slow, -50, 50)))
