"""Where a configuration moved between two sides of a comparison, from its rows' attribution section
(harness.results.attribution, docs/measurement.md): the host and rank the others waited for on the current
side, its straggler score against the baseline's, and the phase of the slowest rank's step (compute, exchange,
data, rest; seconds per step) that grew most. A verdict says whether it got slower; this says where.

Rows without per-rank data (one rank, or tables older than row schema 6) give no answer. Imports pandas only.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import pandas as pd

PHASES = ("compute", "exchange", "data", "rest")
COLUMNS = ("status", "slowest_host", "slowest_rank", "straggler_score",
           *(f"{who}_{phase}_s" for who in ("slowest", "median") for phase in PHASES))  # the ones read here
# A phase must grow by at least this much of the baseline's whole step to be named as what moved (s/s):
# below it the phases' launch-to-launch wobble (a few % of a step here) would be named as a cause.
MIN_PHASE_SHARE = 0.02


@dataclass(frozen=True)
class Straggler:
    """One side's straggler: the host and rank most often slowest over its repeats, the median score."""

    host: str
    rank: int | None
    score: float  # its own time per step / the median rank's (ratio)


@dataclass(frozen=True)
class Where:
    """What moved: the current side's straggler, the baseline's (None without per-rank data there), and the
    slowest rank's phase that grew most (None when none grew beyond MIN_PHASE_SHARE of the step)."""

    current: Straggler
    baseline: Straggler | None
    phase: str | None = None
    phase_baseline_s: float = math.nan  # the slowest rank's seconds per step in that phase, median over repeats
    phase_current_s: float = math.nan

    def text(self) -> str:
        c, b = self.current, self.baseline
        rank = f" rank {c.rank}" if c.rank is not None else ""
        words = f"slowest: host {c.host}{rank}, {_times(c.score, 'the median rank')}"
        if b is not None:
            same = b.host == c.host and b.rank == c.rank
            words += f" (baseline: {'the same' if same else f'host {b.host}' + (f' rank {b.rank}' if b.rank is not None else '')}, {_times(b.score, '')})"
        if self.phase:
            grew = self.phase_current_s / self.phase_baseline_s - 1 if self.phase_baseline_s > 0 else math.inf
            share = f"{grew:+.0%}" if math.isfinite(grew) else "from none"
            words += (f"; its {self.phase} grew most: {self.phase_baseline_s:.4g} -> {self.phase_current_s:.4g} "
                      f"s/step ({share})")
        return words


def _times(score: float, of: str) -> str:
    """A straggler score as "1.25x ..."; a table without one (an empty cell) says so, not "nanx"."""
    return f"{score:.2f}x{' ' + of if of else ''}" if math.isfinite(score) else "no score recorded"


def _measured(rows: pd.DataFrame) -> pd.DataFrame:
    if "slowest_host" not in rows.columns or "status" not in rows.columns:
        return rows.iloc[0:0]
    ok = rows[(rows["status"] == "ok") & rows["slowest_host"].notna()]
    return ok[ok["slowest_host"].astype(str) != ""]


def straggler(rows: pd.DataFrame) -> Straggler | None:
    """The side's straggler, or None where no ok row carries per-rank data."""
    ok = _measured(rows)
    if ok.empty:
        return None
    host = Counter(ok["slowest_host"].astype(str)).most_common(1)[0][0]
    on_host = ok[ok["slowest_host"].astype(str) == host]
    ranks = [int(r) for r in on_host.get("slowest_rank", pd.Series(dtype=object)).dropna()]
    rank = Counter(ranks).most_common(1)[0][0] if ranks else None
    scores = pd.to_numeric(ok.get("straggler_score"), errors="coerce").dropna()
    return Straggler(host, rank, float(scores.median()) if len(scores) else math.nan)


def _phase_medians(rows: pd.DataFrame, who: str) -> dict[str, float]:
    """Median over the ok rows of ``who``'s (slowest or median rank's) seconds per step in each phase."""
    out = {}
    for phase in PHASES:
        column = f"{who}_{phase}_s"
        if column in rows.columns:
            values = pd.to_numeric(rows[column], errors="coerce").dropna()
            if len(values):
                out[phase] = float(values.median())
    return out


def where_moved(baseline: pd.DataFrame, current: pd.DataFrame) -> Where | None:
    """Where the current rows moved from the baseline's (both one configuration's rows), or None where the
    current side carries no per-rank data. Without per-rank data in the baseline the phase is the one in
    which the current slowest rank exceeds the current median rank most."""
    now = straggler(current)
    if now is None:
        return None
    then = straggler(baseline)
    cur = _phase_medians(_measured(current), "slowest")
    ref = _phase_medians(_measured(baseline), "slowest") if then else _phase_medians(_measured(current), "median")
    step = sum(ref.values())
    growth = {p: cur[p] - ref[p] for p in PHASES if p in cur and p in ref}
    phase = max(growth, key=growth.get, default=None)
    if phase is None or not step > 0 or growth[phase] < MIN_PHASE_SHARE * step:
        return Where(now, then)
    return Where(now, then, phase, ref[phase], cur[phase])
