"""Where a configuration moved between two sides of a comparison, from its rows' attribution section
(harness.results.attribution, docs/measurement.md): the host and rank the others waited for on the current
side, its straggler score against the baseline's, and the phase of the slowest rank's step (compute, exchange,
data, rest; seconds per step) that grew most. A verdict says whether it got slower; this says where.

The straggler is also scored against history, as NVIDIA's resiliency extension scores a rank against its own
earlier sections: its own time per step (step less the wait for peers: the sum of its phases) against the
median of the same host and rank's in the history's rows (each row's per-rank table, ``attribution.json``,
where its run folder still holds one; else the rows in which it was the slowest), or, where it has none
there, against the median rank's. A fault that slows every rank alike (a ring at its slowest card's pace)
scores 1.0 against the peers and above 1 against history.

Rows without per-rank data (one rank, or tables older than row schema 6) give no answer. Imports pandas and
harness.results.attribution (the per-rank table's reader).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from harness.results import attribution

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
class History:
    """The current straggler's own time per step against a history's median (:func:`history_score`)."""

    score: float  # its own time now / that median (ratio; 1.0: as before)
    of: str  # whose history: "its own" (the same host and rank) or "the median rank's"
    rows: int  # the history's rows the median is over


@dataclass(frozen=True)
class Where:
    """What moved: the current side's straggler, the baseline's (None without per-rank data there), and the
    slowest rank's phase that grew most (None when none grew beyond MIN_PHASE_SHARE of the step)."""

    current: Straggler
    baseline: Straggler | None
    phase: str | None = None
    phase_baseline_s: float = math.nan  # the slowest rank's seconds per step in that phase, median over repeats
    phase_current_s: float = math.nan
    history: History | None = None

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
        if self.history is not None:
            h = self.history
            words += f"; against history: {h.score:.2f}x {h.of} (median of {h.rows} earlier row{'s' * (h.rows != 1)})"
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


def _own_s(row, who: str) -> float:
    """``who``'s (slowest or median rank's) own seconds per step in a row: the sum of its phases (NaN: none)."""
    values = [pd.to_numeric(row.get(f"{who}_{p}_s"), errors="coerce") for p in PHASES]
    return float(sum(values)) if all(pd.notna(v) for v in values) else math.nan


def _rank_history(rows: pd.DataFrame, host: str, rank: int | None) -> list[float]:
    """The own seconds per step of ``host``'s rank ``rank`` in each of ``rows`` that has them: from the row's
    per-rank table (measured seconds / the row's dilation) where its folder keeps one, else from the row's
    slowest-rank columns where it was the slowest."""
    found = []
    for _, row in rows.iterrows():
        kept = attribution.read_table(row["run_dir"]) if isinstance(row.get("run_dir"), str) else None
        mine = [r for r in kept or () if r.get("host") == host and (rank is None or r["rank"] == rank)]
        k = pd.to_numeric(row.get("dilation"), errors="coerce")
        if mine and isinstance(mine[0].get("own_s"), (int, float)):
            found.append(mine[0]["own_s"] / (k if pd.notna(k) and k > 0 else 1.0))
        elif str(row["slowest_host"]) == host and (rank is None or row.get("slowest_rank") == rank):
            found.append(_own_s(row, "slowest"))
    return [v for v in found if math.isfinite(v)]


def history_score(history: pd.DataFrame, current: pd.DataFrame, now: Straggler) -> History | None:
    """The current straggler's own time per step (median over its rows) against its own in ``history``'s rows
    (:func:`_rank_history`), or the median rank's there where it has none; None without a history."""
    ok, then = _measured(current), _measured(history)
    mine = ok[ok["slowest_host"].astype(str) == now.host]
    own = pd.Series([_own_s(r, "slowest") for _, r in mine.iterrows()], dtype=float).dropna()
    if then.empty or own.empty:
        return None
    earlier, of = _rank_history(then, now.host, now.rank), "its own"
    if not earlier:
        earlier = [v for v in (_own_s(r, "median") for _, r in then.iterrows()) if math.isfinite(v)]
        of = "the median rank's"
    reference = float(pd.Series(earlier, dtype=float).median()) if earlier else math.nan
    return History(float(own.median()) / reference, of, len(earlier)) if reference > 0 else None


def where_moved(baseline: pd.DataFrame, current: pd.DataFrame, history: pd.DataFrame | None = None) -> Where | None:
    """Where the current rows moved from the baseline's (both one configuration's rows), or None where the
    current side carries no per-rank data. Without per-rank data in the baseline the phase is the one in
    which the current slowest rank exceeds the current median rank most. The straggler is scored against
    ``history`` (default: the baseline's rows; :func:`history_score`)."""
    now = straggler(current)
    if now is None:
        return None
    past = history_score(baseline if history is None else history, current, now)
    then = straggler(baseline)
    cur = _phase_medians(_measured(current), "slowest")
    ref = _phase_medians(_measured(baseline), "slowest") if then else _phase_medians(_measured(current), "median")
    step = sum(ref.values())
    growth = {p: cur[p] - ref[p] for p in PHASES if p in cur and p in ref}
    phase = max(growth, key=growth.get, default=None)
    if phase is None or not step > 0 or growth[phase] < MIN_PHASE_SHARE * step:
        return Where(now, then, history=past)
    return Where(now, then, phase, ref[phase], cur[phase], past)
