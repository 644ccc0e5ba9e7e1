"""The gate as CI holds it: one pass over a series' sweeps in time order, each sweep deciding once.

What the gate says after sweep n depends only on sweeps 0..n, and what an earlier sweep decided is never
undone: a step confirmed at sweep n is in the report of every later sweep (only a suspicion is withdrawn,
and the withdrawal says why). So the store after sweep n, read by ``rosetta history`` in CI, gives the
verdict this pass reads at n: the record is the replay (tests/unit/gate/test_gate_record.py checks it).

Each sweep, against the current **level** (the sweeps since the last step, outliers left out):

* a **step** inside the level whose far side reaches the newest sweep: the best split of the level's
  sweeps, significant at ``alpha / 10`` shared among the splits tried, beyond ``floor``, still so without
  its most departing sweep, the newest sweeps on the new side. This sees a small step once enough sweeps
  hold it;
* no suspicion open: the newest 1, 2 and 3 sweeps, all on one side of the level (Student's t at
  ``alpha / TRAIL`` with the noise's degrees of freedom, beyond ``floor``): the fewest that depart open a
  **suspicion** at the first of them. A suspicion never fails CI (one sweep cannot tell a step from an
  outlier);
* a suspicion open: its sweeps against the level (``alpha / 10``, ``floor``, at least ``MIN_LEVEL`` sweeps,
  each nearer the new level than the old) **confirm** it as a step, placed where the split of the level's
  sweeps and the new ones fits best (up to ``RELOCATE`` sweeps earlier). A newest sweep nearer the old
  level **withdraws** it: the departed sweeps beyond ``CLIP`` of their noise (and the floor) are outliers,
  the others rejoin the level (a suspicion open for ``PENDING_MAX`` sweeps is withdrawn too);
* **drift**: a step in the direction of the step just before it, where one line from that earlier step on
  fits the sweeps better than the staircase (by the Bayesian information criterion), is the drift going on,
  recorded as such: the first step of a drift fails CI, its continuation does not;
* an **accepted** sweep (a team's mark: "this is the new normal") starts a new level without a test.

A run fails CI when its sweep confirms a step down that does not continue a drift: once per change.

Pure computation; the figures are :mod:`harness.results.launches`'.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Sequence

from harness.gate.record import (  # noqa: F401 - the record's parts, named here for the callers of the pass
    ACCEPTED,
    CONFIRMED,
    DOWN,
    SAME,
    SUSPECTED,
    UP,
    WITHDRAWN,
    Pending,
    Reading,
    Segment,
    Step,
    Withdrawal,
    level_of,
    line_rss,
    rss,
    t_quantile,
    two_sided_p,
)
from harness.results import launches as launch_model

MIN_BASE = 3  # sweeps a level needs before sweeps are judged against it
MIN_LEVEL = 2  # sweeps a new level needs before a step to it is confirmed
TRAIL = 3  # the newest sweeps tested together when no suspicion is open (1, 2, 3)
RELOCATE = 2  # a confirmed step is placed up to this many sweeps before its suspicion's first sweep
PENDING_MAX = 8  # sweeps a suspicion stays open unconfirmed
SPLIT_ALPHA = 2.0  # the split test's level, a multiple of alpha (shared among the splits tried)
# the splits of one level are tested together: their statistics are correlated, so the level they share is
# split among m ** SPLIT_SHARING of them (0.8 matches the maximum of the standardised splits of 10 to 35
# normal sweeps, simulated, at the 0.3 to 3% levels; Bonferroni, an exponent of 1, is 0.1 to 0.25 too strict)
SPLIT_SHARING = 0.8
CLIP = 2.5  # the split test's sweeps are clipped at this many of their noise from the level
SHORT_LEVEL = 6  # a new level this short must hold without its most departing sweep
POWER_Z = 0.8416  # 80% power, for the minimum detectable effect
MDE_SWEEPS = 3  # the MDE is the step confirmed from this many sweeps after it
# what those sweeps and the level's are worth in the MDE's test: the suspicion comes first, so 3 new sweeps
# weigh as MDE_NEW would in one test, and the level's estimate MDE_BASE times (fitted to the pass's own power,
# simulated: 80% at 4.1, 3.7 and 3.3 sweep noises for levels of 5, 10 and 20 sweeps)
MDE_NEW, MDE_BASE = 1.9, 2.3

class Pass:
    """The gate's record of one series, built sweep by sweep (:meth:`add`)."""

    def __init__(self, alpha: float = 0.01, floor: float = 0.03):
        self.alpha, self.floor = alpha, floor
        self.logs: list[list[float]] = []  # per judged sweep, its launches' log rates
        self.judged: list[int] = []  # their sweep indexes
        self.segments: list[Segment] = []
        self.pending: Pending | None = None
        self.outliers: list[int] = []
        self.steps: list[Step] = []
        self.withdrawals: list[Withdrawal] = []
        self.readings: list[Reading] = []
        self.launches = launch_model.Launches()
        self.figures: launch_model.Figures | None = None
        self.y: dict[int, float] = {}
        self.var: dict[int, float] = {}
        self.count = 0  # sweeps seen, judged or not
        self.names: list[str] = []

    # ------------------------------------------------------------ one sweep

    def add(self, launch_logs: Sequence[float], judged: bool = True, accept: str | None = None,
            name: str = "") -> Reading:
        """The next sweep (its launches' log samples/s); ``accept``: why a team declared it the new normal;
        ``name``: its id, for the notes."""
        t = self.count
        self.count += 1
        self.names.append(name or str(t))
        if not judged or not launch_logs:
            reading = Reading(t, "")
        else:
            self.logs.append(list(launch_logs))
            self.judged.append(t)
            self.figures = self.launches.add(launch_logs)
            self.y = dict(zip(self.judged, self.figures.y))
            self.var = dict(zip(self.judged, self.figures.var))
            if accept is not None:
                reading = self._accept(t, accept)
            elif not self.segments:
                self.segments.append(Segment(t, [t]))
                reading = Reading(t, "", note=f"1 sweep measured: too few to judge ({MIN_BASE + 1} needed)")
            elif self.pending is not None:
                reading = self._follow(t)
            else:
                reading = self._watch(t)
        self.readings.append(reading)
        return reading

    @property
    def dof(self) -> float:
        return self.figures.model.dof if self.figures else 1.0

    def _bar(self, alpha: float) -> float:
        return t_quantile(1 - alpha / 2, round(self.dof))

    def _test(self, base: Sequence[int], tail: Sequence[int]) -> tuple[float, float, float]:
        """(gap, z, the old level) of ``tail``'s sweeps against the level of ``base`` (log units)."""
        old, old_var = level_of(base, self.var, self.y)
        new, new_var = level_of(tail, self.var, self.y)
        return new - old, (new - old) / math.sqrt(old_var + new_var), old

    def _p(self, z: float) -> float:
        return two_sided_p(z, self.dof)

    def _accept(self, t: int, why: str) -> Reading:
        level = self.segments[-1] if self.segments else None
        before = level_of(level.members, self.var, self.y)[0] if level and level.members else self.y[t]
        if self.pending is not None:
            self.withdrawals.append(Withdrawal(self.pending.start, t, (), f"accepted at sweep {self._n(t)}: {why}"))
            self.pending = None
        self.segments.append(Segment(t, [t]))
        change = math.expm1(self.y[t] - before)
        self.steps.append(Step(t, t, ACCEPTED, DOWN if change < 0 else UP, change, before, self.y[t], math.nan,
                               note=why))
        return Reading(t, SAME, change=change, step=t, step_change=change, note=f"the level restarts here: {why}")

    def _watch(self, t: int) -> Reading:
        """No suspicion open: a step inside the level, else the newest sweeps against the level."""
        level = self.segments[-1]
        if len(level.members) < MIN_BASE:
            level.members.append(t)
            if not self.steps:  # the series' first sweeps
                return Reading(t, "", note=f"{len(level.members)} sweeps measured: too few to judge "
                                           f"({MIN_BASE + 1} needed)")
            return Reading(t, SAME, step=self._last_step(), note=f"the level since sweep {self._n(level.start)} has "
                                                                 f"{len(level.members)} sweeps; {MIN_BASE} before "
                                                                 "sweeps are judged against it")
        split = self._split(t)
        if split is not None:
            return split
        own_gap, own_z, _ = self._test(level.members, [t])
        for k in range(1, TRAIL + 1):  # the fewest newest sweeps that depart: the newest alone first
            tail = level.members[len(level.members) - k + 1:] + [t] if k > 1 else [t]
            base = level.members[:len(level.members) - k + 1]
            if len(base) < MIN_BASE:
                break
            gap, z, old = self._test(base, tail)
            if not all((self.y[i] - old) * gap > 0 for i in tail):
                continue
            if abs(z) >= self._bar(self.alpha / TRAIL) and abs(math.expm1(gap)) >= self.floor:
                for i in tail[:-1]:
                    level.members.remove(i)
                self.pending = Pending(tail[0], DOWN if gap < 0 else UP, list(tail), t)
                confirmed = self._confirm(t)
                if confirmed is not None:
                    return confirmed
                return Reading(t, SUSPECTED, self.pending.direction, math.expm1(own_gap), self._p(own_z),
                               step=tail[0], step_change=math.expm1(gap), step_p=self._p(z),
                               note=self._suspicion_note(t))
        level.members.append(t)
        return Reading(t, SAME, change=math.expm1(own_gap), p_value=self._p(own_z), step=self._last_step(),
                       note=self._level_note(level))

    def _follow(self, t: int) -> Reading:
        """A suspicion open: the newest sweep confirms it, keeps it open, or withdraws it."""
        pending, level = self.pending, self.segments[-1]
        pending.members.append(t)
        confirmed = self._confirm(t) or self._split(t)
        if confirmed is not None:
            return confirmed
        old = level_of(level.members, self.var, self.y)[0]
        new = statistics.fmean(self.y[i] for i in pending.members[:-1])
        if abs(self.y[t] - old) < abs(self.y[t] - new) or (self.y[t] - old) * (new - old) < 0:
            return self._withdraw(t, f"sweep {self._n(t)} came back to the level")
        if t - pending.opened >= PENDING_MAX:
            return self._withdraw(t, f"not confirmed in {PENDING_MAX} sweeps")
        gap, z, _ = self._test(level.members, pending.members)
        own_gap, own_z, _ = self._test(level.members, [t])
        return Reading(t, SUSPECTED, pending.direction, math.expm1(own_gap), self._p(own_z), step=pending.start,
                       step_change=math.expm1(gap), step_p=self._p(z), note=self._suspicion_note(t))

    def _withdraw(self, t: int, why: str) -> Reading:
        pending, level = self.pending, self.segments[-1]
        self.pending = None
        departed = pending.members[:-1]
        old = level_of(level.members, self.var, self.y)[0]  # outliers: beyond CLIP of their noise and the floor
        out = tuple(i for i in departed if abs(self.y[i] - old) > max(CLIP * math.sqrt(self.var[i]),
                                                                      math.log1p(self.floor)))
        rejoin = [i for i in departed if i not in out]
        self.outliers += out
        level.members = sorted(level.members + rejoin)
        reason = why + (f"; {self._sweeps(out)} {'is an outlier' if len(out) == 1 else 'are outliers'}" if out else "") + (
            f"; {self._sweeps(rejoin)} {'rejoins' if len(rejoin) == 1 else 'rejoin'} the level" if rejoin else "")
        self.withdrawals.append(Withdrawal(pending.start, t, out, reason))
        reading = self._watch(t)
        note = f"the suspicion since sweep {self._n(pending.start)} is withdrawn: {reason}"
        return replace(reading, note=note + ("; " + reading.note if reading.note else ""))

    def _confirm(self, t: int) -> Reading | None:
        """The open suspicion as a step, if this sweep's evidence holds; else None."""
        pending, level = self.pending, self.segments[-1]
        if len(pending.members) < MIN_LEVEL:
            return None
        gap, z, old = self._test(level.members, pending.members)
        new = old + gap
        holds = all(abs(self.y[i] - new) < abs(self.y[i] - old) for i in pending.members)
        if not (abs(z) >= self._bar(self.alpha / 10) and abs(math.expm1(gap)) >= self.floor and holds
                and (gap < 0) == (pending.direction == DOWN)):
            return None
        members = sorted(level.members + pending.members)
        return self._settle(t, self._place(members, pending.start), pending.direction, members)

    def _split(self, t: int) -> Reading | None:
        """A step inside the current level with the newest sweep on its far side (see the module's docstring):
        what sees a step too small for the newest sweeps alone, once enough sweeps hold it."""
        level = self.segments[-1]
        members = sorted(level.members + (self.pending.members if self.pending else [t]))
        candidates = range(MIN_BASE, len(members) - MIN_LEVEL + 1)
        if not candidates:
            return None
        w = [1.0 / self.var[i] for i in members]
        # each sweep's departure from the level clipped at CLIP of its noise (a Huber score): one extreme
        # sweep cannot carry a split, a step moves every sweep after it
        centre = level_of(level.members, self.var, self.y)[0]
        wy = [wi * (centre + max(-CLIP * s, min(CLIP * s, self.y[i] - centre)))
              for wi, i, s in zip(w, members, (math.sqrt(self.var[i]) for i in members))]
        total_w, total_wy = sum(w), sum(wy)
        bar = self._bar(self.alpha * SPLIT_ALPHA / len(candidates) ** SPLIT_SHARING)
        best, head_w, head_wy = None, sum(w[:MIN_BASE]), sum(wy[:MIN_BASE])
        for k in candidates:
            ma, mb = head_wy / head_w, (total_wy - head_wy) / (total_w - head_w)
            z = (mb - ma) / math.sqrt(1 / head_w + 1 / (total_w - head_w))
            head_w, head_wy = head_w + w[k], head_wy + wy[k]
            if abs(z) < bar or abs(math.expm1(mb - ma)) < self.floor or (best is not None and abs(z) <= abs(best[0])):
                continue
            after = members[k:]
            recent = statistics.fmean(self.y[i] for i in after[-MIN_BASE:])
            near = abs(recent - mb) < abs(recent - ma) and (
                len(after) >= 2 * MIN_LEVEL or all(abs(self.y[i] - mb) < abs(self.y[i] - ma) for i in after))
            if near and (len(after) >= SHORT_LEVEL or self._without_one(members[:k], after, z)):
                best = (z, members[k])
        if best is None:
            return None
        z, c = best
        return self._settle(t, c, DOWN if z < 0 else UP, members)

    def _without_one(self, before: list[int], after: list[int], z: float) -> bool:
        """The split still holds (at ``alpha / 10``) without its most departing sweep: one extreme sweep in
        a short new level (under ``SHORT_LEVEL`` sweeps) is an outlier's doing, not a step's."""
        sign = 1 if z > 0 else -1
        extreme = max(after, key=lambda i: sign * self.y[i])
        gap, z_rest, _ = self._test(before, [i for i in after if i != extreme])
        return sign * z_rest >= self._bar(self.alpha / 10) and abs(math.expm1(gap)) >= self.floor

    def _place(self, members: list[int], start: int) -> int:
        """Where a suspicion's step starts: the split near its first sweep that fits best."""
        best, where = math.inf, start
        for c in [i for i in members if start - RELOCATE <= i <= start]:
            a, b = [i for i in members if i < c], [i for i in members if i >= c]
            if len(a) < MIN_BASE:
                continue
            spread = rss(a, self.y) + rss(b, self.y)
            if spread < best - 1e-12:
                best, where = spread, c
        return where

    def _settle(self, t: int, c: int, direction: str, members: list[int]) -> Reading:
        """Record the confirmed step at ``c`` (``members``: the level's sweeps and the new ones)."""
        level = self.segments[-1]
        old_members, new_members = [i for i in members if i < c], [i for i in members if i >= c]
        gap, z, before = self._test(old_members, new_members)
        drift = self._drift(c, direction, new_members)
        step = Step(c, t, CONFIRMED, direction, math.expm1(gap), before, before + gap, self._p(z), drift=drift)
        level.members = old_members
        self.segments.append(Segment(c, new_members))
        self.steps.append(step)
        self.pending = None
        own_gap, own_z, _ = self._test(old_members, [t])
        what = (f"the drift since sweep {self._n(drift)} goes on: a step {direction} at sweep {self._n(c)}" if drift is not None
                else f"a step {direction} at sweep {self._n(c)}, confirmed by this sweep")
        return Reading(t, CONFIRMED, direction, math.expm1(own_gap), self._p(own_z), step=c, step_change=step.change,
                       step_p=step.p_value, drift=drift, note=what)

    def _drift(self, c: int, direction: str, new_members: list[int]) -> int | None:
        """The first sweep of the drift a step at ``c`` continues, or None: the step just before it went the
        same way and one line from that step's level on fits better than the stairs (BIC)."""
        if not self.steps or self.steps[-1].kind != CONFIRMED or self.steps[-1].direction != direction:
            return None
        first = self.steps[-1].drift if self.steps[-1].drift is not None else self.steps[-1].index
        stairs = [seg.members for seg in self.segments if seg.start >= first and seg.members]
        stairs[-1] = [i for i in stairs[-1] if i < c]
        stairs = [s for s in stairs if s] + [new_members]
        span = [i for s in stairs for i in s]
        before = next((seg.members for seg in reversed(self.segments) if seg.start < first and seg.members), [])
        if len(span) < 2 * MIN_BASE or not before:
            return None
        sigma2 = self.figures.sigma() ** 2
        n = len(before) + len(span)
        staircase = (rss(before, self.y) + sum(rss(s, self.y) for s in stairs)) / sigma2 + 2 * len(stairs) * math.log(n)
        line = (rss(before, self.y) + line_rss(span, self.y)) / sigma2 + 3 * math.log(n)
        return first if line < staircase else None

    # ------------------------------------------------------------ words

    def _n(self, index: int) -> str:
        """A sweep's name in words (its id where the caller gave one)."""
        return self.names[index] if index < len(self.names) else str(index)

    def _sweeps(self, indexes: Sequence[int]) -> str:
        return ("sweep " if len(indexes) == 1 else "sweeps ") + ", ".join(map(self._n, indexes))

    def _last_step(self) -> int | None:
        return self.steps[-1].index if self.steps else None

    def _level_note(self, level: Segment) -> str:
        if not self.steps:
            return ""
        last = self.steps[-1]
        if last.drift is not None:
            return f"on the drift since sweep {self._n(last.drift)} (its last step at sweep {self._n(last.index)}, {last.change:+.1%})"
        when = "accepted" if last.kind == ACCEPTED else f"confirmed at sweep {self._n(last.decided)}"
        return f"at the level since sweep {self._n(level.start)}: the step {last.direction} there ({last.change:+.1%}, {when})"

    def _suspicion_note(self, t: int) -> str:
        since = "this sweep departs" if self.pending.start == t else f"the sweeps since {self._n(self.pending.start)} depart"
        return f"{since} from the level; not failing: a later sweep confirms or withdraws it"

    # ------------------------------------------------------------ power

    def mde(self) -> float:
        """The smallest step (a fraction of throughput) the gate confirms with 80% power from ``MDE_SWEEPS``
        sweeps after it, at this series' noise and launches and its current level's length; NaN: unknown."""
        if self.figures is None or len(self.judged) <= MIN_BASE:
            return math.nan
        typical = statistics.median(len(lr) for lr in self.logs)
        sigma = self.figures.sigma(typical)
        base = max(len(self.segments[-1].members), MIN_BASE)
        spread = sigma * math.sqrt(1 / MDE_NEW + MDE_BASE / base)
        # significant, and beyond the floor with 80% power too (a step at the floor itself is seen half the time)
        effect = max(self._bar(self.alpha / 10) * spread, -math.log1p(-self.floor)) + POWER_Z * spread
        return -math.expm1(-effect)
