"""The arithmetic of the measurements, as small pure functions."""

from __future__ import annotations

import math
import statistics
from typing import Callable, Sequence

import numpy as np

# Two-sided 95% Student-t quantiles t(0.975, df) for df = 1..30; beyond that, 1.96 is close enough.
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042]


def run_throughput(samples_per_rank: Sequence[int], window_s_per_rank: Sequence[float]) -> float:
    """Samples/s of one run: global samples in the measured window / the slowest rank's window (s).

    Not rank 0 x world size, nor a mean of per-step rates: the run is as fast as its slowest rank.
    """
    if not samples_per_rank or len(samples_per_rank) != len(window_s_per_rank):
        raise ValueError("need one window per rank")
    slowest = max(window_s_per_rank)
    if slowest <= 0:
        raise ValueError("measured window must be positive")
    return sum(samples_per_rank) / slowest


def scaling_efficiency(throughput_n: float, world_n: int, throughput_base: float, world_base: int) -> float:
    """throughput(N) / (N / N0 x throughput(N0)): 1.0 is ideal linear scaling; NaN against a baseline that
    measured nothing (0 samples/s: no efficiency can be told)."""
    ideal = world_n / world_base * throughput_base
    return throughput_n / ideal if ideal > 0 else math.nan


def step_times(per_rank_steps: Sequence[Sequence[float]]) -> list[float]:
    """Per-step time of the run (s): for each step index, the slowest rank's time."""
    return [max(times) for times in zip(*per_rank_steps)]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), the same as numpy's default."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """95% Student-t confidence interval of the mean; (nan, nan) with fewer than 2 values."""
    n = len(values)
    if n < 2:
        return (math.nan, math.nan)
    mean = statistics.fmean(values)
    half = (_T975[n - 2] if n - 1 <= len(_T975) else 1.96) * statistics.stdev(values) / math.sqrt(n)
    return (mean - half, mean + half)


# Below this many repeats a t interval is not shown: with 2 values it multiplies the spread by 12.7.
MIN_REPEATS_FOR_CI = 3
RANGE = "range"  # the observed min-max of fewer than MIN_REPEATS_FOR_CI repeats
CI95_LOG = "95% CI (log)"  # exp of the Student-t interval of log(throughput): the geometric mean's, > 0
INTERVAL_HOW = (f"spread: the observed min-max (n shown) with fewer than {MIN_REPEATS_FOR_CI} repeats, "
                f"else the 95% CI of the geometric mean (Student-t on log throughput, never below 0)")


def throughput_interval(values: Sequence[float]) -> tuple[float, float, str]:
    """(low, high, kind) of a positive quantity (throughput, samples/s) over repeats.

    Fewer than :data:`MIN_REPEATS_FOR_CI` values: their observed range (kind :data:`RANGE`; NaNs
    with fewer than 2). Otherwise the 95% interval of the geometric mean, from a Student-t interval
    of the logarithms (kind :data:`CI95_LOG`): throughput is positive and its spread multiplicative,
    so the interval is too, and never reaches zero.
    """
    values = [float(v) for v in values]
    if len(values) < 2:
        return (math.nan, math.nan, "")
    if len(values) < MIN_REPEATS_FOR_CI or min(values) <= 0:
        return (min(values), max(values), RANGE)
    low, high = mean_ci95([math.log(v) for v in values])
    return (math.exp(low), math.exp(high), CI95_LOG)


def interval_text(low: float, high: float, kind: str, n: int, digits: int = 1) -> str:
    """The interval as a table cell: ``12.1-14.0 (range of 2)`` or ``12.1-14.0``; ``-`` if none."""
    if not kind or math.isnan(low):
        return "-"
    cell = f"{low:.{digits}f}-{high:.{digits}f}"
    return f"{cell} ({RANGE} of {n})" if kind == RANGE else cell


# The convergence guard looks for a decrease only in runs with at least this many measured steps:
# over a handful of steps a loss that wiggles is no evidence of divergence.
MIN_STEPS_FOR_TREND = 10


def convergence_problem(losses: Sequence[float], min_steps: int = MIN_STEPS_FOR_TREND) -> str | None:
    """Why a run's training loss says it diverged, or None.

    Diverged: any loss is NaN or infinite; or, with at least ``min_steps`` losses, the mean of
    the last quarter is not below the mean of the first quarter (the loss did not decrease).
    """
    for index, value in enumerate(losses):
        if not math.isfinite(value):
            return f"loss is {value} at measured step {index}"
    if len(losses) < min_steps:
        return None
    quarter = max(1, len(losses) // 4)
    first, last = statistics.fmean(losses[:quarter]), statistics.fmean(losses[-quarter:])
    if last >= first:
        return (f"loss did not decrease: mean of the last {quarter} steps {last:.4g} >= "
                f"mean of the first {quarter} {first:.4g}")
    return None


def time_to_target(curve: Sequence[tuple[int, float]], step_seconds: Sequence[float],
                   target: float) -> tuple[int, float] | tuple[None, None]:
    """(steps, seconds) until the first evaluation at or above ``target``, or (None, None).

    ``curve`` holds (step, accuracy) pairs, steps 1-based; ``step_seconds[i]`` is the time of
    step i + 1 (the slowest rank's), so the time is the training time up to that step,
    evaluation excluded.
    """
    for step, accuracy in curve:
        if accuracy >= target:
            return step, math.fsum(step_seconds[:step])
    return None, None


# ---------------------------------------------------------------- two sides of a comparison (rosetta compare)


def bootstrap_ci(base: Sequence[Sequence[float]], cur: Sequence[Sequence[float]], *, resamples: int = 2000,
                 seed: int = 0, statistic: Callable = np.median) -> tuple[float, float]:
    """95% interval of the change (throughput fraction) by resampling repeats, then steps; the location
    is the fastest launch's ``statistic`` (np.median or np.mean, taking an ``axis``)."""
    rng = np.random.default_rng(seed)
    base = [np.asarray(s, dtype=float) for s in base if len(s)]
    cur = [np.asarray(s, dtype=float) for s in cur if len(s)]

    def location(side: list[np.ndarray]) -> np.ndarray:
        # per resample: pick repeats with replacement, resample each one's steps, take the fastest location
        picks = rng.integers(0, len(side), size=(resamples, len(side)))
        out = np.full(resamples, np.inf)
        for col in range(len(side)):
            for idx in np.unique(picks[:, col]):
                rows = np.nonzero(picks[:, col] == idx)[0]
                s = side[idx]
                value = statistic(s[rng.integers(0, len(s), size=(len(rows), len(s)))], axis=1)
                out[rows] = np.minimum(out[rows], value)
        return out

    change = location(base) / location(cur) - 1
    low, high = np.percentile(change, [2.5, 97.5])
    return float(low), float(high)


def mann_whitney_p(base: Sequence[Sequence[float]], cur: Sequence[Sequence[float]]) -> float:
    from scipy.stats import mannwhitneyu

    a = [t for s in base for t in s]
    b = [t for s in cur for t in s]
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def welch_p(base: Sequence[Sequence[float]], cur: Sequence[Sequence[float]]) -> float:
    """Welch's t test of the pooled step times' means (two-sided): throughput, where the U test asks
    about the typical step."""
    from scipy.stats import ttest_ind

    a = [t for s in base for t in s]
    b = [t for s in cur for t in s]
    return float(ttest_ind(a, b, equal_var=False).pvalue)


def nested_t(base: Sequence[Sequence[float]], cur: Sequence[Sequence[float]],
             confidence: float = 0.95) -> tuple[float, float, float, float] | None:
    """Launches and steps as two levels of one test of throughput: each launch's mean step time is one
    observation (its steps make it precise; launches vary about the configuration's level), the two sides'
    launch-to-launch variance pooled (log units), Student's t with launches - 2 degrees of freedom: the
    nested model's test of a fixed effect above a random one. Returns (change of throughput, p, low, high)
    with the interval at ``confidence``, or None with fewer than 2 launches a side.

    Where some steps stall in every launch, the pooled step times make the stall look like noise (their
    spread is the stall); the launches' means do not, since each holds its stall."""
    from scipy.special import stdtr, stdtrit

    a = [math.log(statistics.fmean(s)) for s in base if len(s)]
    b = [math.log(statistics.fmean(s)) for s in cur if len(s)]
    if len(a) < 2 or len(b) < 2:
        return None
    dof = len(a) + len(b) - 2
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    pooled = (sum((x - ma) ** 2 for x in a) + sum((x - mb) ** 2 for x in b)) / dof
    se = max(math.sqrt(pooled * (1 / len(a) + 1 / len(b))), 1e-12)
    slower = mb - ma  # log step time: positive is slower
    p = float(2 * stdtr(dof, -abs(slower) / se))
    q = float(stdtrit(dof, 0.5 + confidence / 2))
    return math.expm1(-slower), p, math.expm1(-(slower + q * se)), math.expm1(-(slower - q * se))
