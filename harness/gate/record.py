"""What the gate's pass writes down about a series (:mod:`harness.gate.sequential`): its levels, the steps
it confirmed or a team accepted, the suspicions it withdrew and why, what each sweep's run read; and the
small statistics the pass uses (Student's t through scipy's C functions, weighted levels, residual sums).
Pure data and arithmetic."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

SUSPECTED, CONFIRMED, ACCEPTED, WITHDRAWN, SAME = "suspected", "confirmed", "accepted", "withdrawn", "no change"
DOWN, UP = "down", "up"


@lru_cache(maxsize=8192)
def t_quantile(p: float, dof: float) -> float:
    """Student's t quantile (scipy's C function), cached: the tests ask the same few hundred often."""
    from scipy.special import stdtrit

    return float(stdtrit(max(dof, 1.0), p))


def two_sided_p(z: float, dof: float) -> float:
    """Student's t two-sided p of ``z`` (scipy's C function: scipy.stats costs a millisecond a call)."""
    from scipy.special import stdtr

    return float(2 * stdtr(max(dof, 1.0), -abs(z)))


@dataclass
class Segment:
    """A level in the record: from sweep ``start``, its sweeps (judged, not outliers)."""

    start: int
    members: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Step:
    """A change in the record: where it starts, which sweep decided it, and its figures then."""

    index: int  # first sweep of the new level
    decided: int  # the sweep whose run confirmed (or accepted) it
    kind: str  # CONFIRMED or ACCEPTED
    direction: str  # DOWN (slower) or UP
    change: float  # fraction of throughput, new level / old - 1
    before: float  # log samples/s
    after: float
    p_value: float
    drift: int | None = None  # the first sweep of the drift this step continues (None: a change of its own)
    note: str = ""  # an acceptance's reason


@dataclass(frozen=True)
class Withdrawal:
    """A suspicion the later sweeps did not hold, and why."""

    index: int
    decided: int
    outliers: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class Reading:
    """What the run after one sweep decides about that newest sweep."""

    index: int
    decision: str  # CONFIRMED, SUSPECTED, SAME, or "" (not judged)
    direction: str = ""
    change: float = math.nan  # the newest sweep against the level it is judged by (a fraction)
    p_value: float = math.nan
    step: int | None = None  # first sweep of the step or suspicion the newest sweep belongs to
    step_change: float = math.nan
    step_p: float = math.nan
    drift: int | None = None  # a confirmed step that continues the drift since this sweep
    note: str = ""

    @property
    def fails(self) -> bool:
        """The run fails CI: this sweep confirmed a step down that is not a drift's continuation."""
        return self.decision == CONFIRMED and self.direction == DOWN and self.drift is None


@dataclass
class Pending:
    start: int
    direction: str
    members: list[int]
    opened: int


def level_of(members: Sequence[int], var: dict[int, float], y: dict[int, float]) -> tuple[float, float]:
    """(weighted mean, its variance) of sweeps' figures, log units."""
    total = weighted = 0.0
    for i in members:
        w = 1.0 / var[i]
        total += w
        weighted += w * y[i]
    return weighted / total, 1.0 / total


def rss(members: Sequence[int], y: dict[int, float]) -> float:
    if not members:
        return 0.0
    mean = statistics.fmean(y[i] for i in members)
    return sum((y[i] - mean) ** 2 for i in members)


def line_rss(members: Sequence[int], y: dict[int, float]) -> float:
    """The residual sum of squares of a straight line through the sweeps' figures."""
    xs = [float(i) for i in members]
    ys = [y[i] for i in members]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (v - my) for x, v in zip(xs, ys)) / sxx if sxx else 0.0
    return sum((v - my - b * (x - mx)) ** 2 for x, v in zip(xs, ys))
