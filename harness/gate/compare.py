"""Compare two sets of results configuration by configuration, with a noise-aware verdict.

Rows are matched by ``config_id`` (the full configuration: every dimension, the
workload options and the seed). For each configuration the raw per-step samples
of every repeat (``step_times_s``) are used, not only the per-repeat summary:

* location of a side = the fastest launch's mean step time (s), i.e. its throughput: a
  stall in some steps lowers throughput and so moves the location, where a median would not
  see it. Taking the fastest of the repeats discards launches slowed by the machine, because
  on a shared machine timing noise only ever adds time (Chen & Revels 2016, "Robust
  benchmarking in noisy environments", the rule BenchmarkTools.jl uses); launches measured on
  a busy machine (``machine_busy``) are left out first;
* change = baseline location / current location - 1, in throughput terms: -0.10
  means the current code processes 10% fewer samples per second;
* noise threshold, learned from the baseline's own spread: the largest change the
  location shows when one baseline repeat is left out (a jackknife; with a single
  repeat, the gap between the means of its two halves), never below ``floor``;
* significance: a two-sided Mann-Whitney U test (scipy) of the pooled per-step
  times of the two sides;
* a 95% confidence interval of the change by a two-level bootstrap (repeats, then
  steps within each repeat), so that launch-to-launch variation is in it;
* where throughput moved and the typical step did not (a stall in some steps), the window is judged with
  launches and steps as two levels of one test (``metrics.nested_t``: each launch's mean step time one
  observation, Student's t on the launches), so that a stall held by every launch is not taken for
  step-to-step noise; with one launch a side, Welch's t of the pooled steps.

A change is a regression (or an improvement) only when it is beyond the threshold,
the U test gives p < ``alpha`` *and* the bootstrap interval excludes zero (the U
test alone treats every step as independent and so is overconfident when whole
launches shift; the interval is not), from at least ``MIN_LAUNCHES`` launches a side.
A change beyond the threshold without that evidence is ``inconclusive``, never "no
change"; a side measured only on a busy machine, or with step times that are not
finite, is ``not judged``; a run skipped here is ``skipped``. Only a regression or a
run that now fails fails the gate. Provenance (hardware and software facts) is
compared for every configuration and every difference is reported next to it.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from harness.base.errors import UserError
from harness.contract.axes import Status
from harness.results import table as results
from harness.results.metrics import bootstrap_ci, mann_whitney_p, nested_t, welch_p  # noqa: F401 - compare's API too
from harness.gate.sources import load_source, load_sweeps, previous_sweep  # noqa: F401 - compare's API too
from harness.gate.where import where_moved

# Facts that must match for a comparison to mean "same machine, same software".
HARDWARE_FIELDS = ("cpu_model", "cpu_cores", "gpu_model", "gpu_count", "gpu_driver")
SOFTWARE_FIELDS = ("framework_version", "versions", "harness_version", "harness_commit")
FAULT_FIELDS = ("fault_kind", "fault_host", "fault_rank", "fault_severity")  # an emulated cluster's planted fault
PROVENANCE_FIELDS = HARDWARE_FIELDS + SOFTWARE_FIELDS + FAULT_FIELDS

ALPHA = 0.01  # significance level of the U test
FLOOR = 0.03  # the smallest threshold, as a fraction of throughput (2-4% launch-to-launch here)
# Launches a side needs for a verdict: the threshold is learned from the baseline's launch-to-launch
# spread (one launch has none), and a single current launch is as likely a slow launch as slow code.
MIN_LAUNCHES = 2

REGRESSION, IMPROVEMENT, SAME, FAILED, MISSING, NEW = (
    "regression", "improvement", "no change", "failed", "missing", "new")
INCONCLUSIVE = "inconclusive"  # beyond the noise, without the evidence a verdict needs
NOT_JUDGED = "not judged"  # a side measured only on a busy machine, or step times that are not finite
SKIPPED = "skipped"  # the current run was skipped here (this machine cannot run it): not a failure
GATE_FAILING = (REGRESSION, FAILED)


@dataclass(frozen=True)
class Side:
    """One side of a configuration's comparison: per-repeat step times (s) and throughputs."""

    steps: tuple[tuple[float, ...], ...]  # per repeat: per measured step, slowest rank's time (s)
    throughputs: tuple[float, ...]  # per repeat, samples/s

    @property
    def repeats(self) -> int:
        return len(self.steps)

    def location(self) -> float:
        """The fastest launch's median step time (s)."""
        return fastest(self.steps, statistics.median)

    def window_location(self) -> float:
        """The fastest launch's mean step time (s): its measured window over its steps, i.e. its throughput."""
        return fastest(self.steps, statistics.fmean)


@dataclass(frozen=True)
class Cell:
    """The comparison of one configuration."""

    config_id: str
    label: str
    verdict: str
    change: float = math.nan  # fraction of throughput, current vs baseline; negative = slower
    ci_low: float = math.nan
    ci_high: float = math.nan
    threshold: float = math.nan  # fraction of throughput learned from the baseline's spread
    p_value: float = math.nan
    baseline_rate: float = math.nan  # global samples / location (samples/s)
    current_rate: float = math.nan
    baseline_repeats: int = 0
    current_repeats: int = 0
    unit: str = "samples"
    provenance: tuple[str, ...] = field(default_factory=tuple)  # "field: baseline -> current"
    note: str = ""
    alpha: float = ALPHA  # the significance level the verdict was judged at
    where: str = ""  # the straggler and the phase that moved, from per-rank data (harness.gate.where)


def fastest(steps: Sequence[Sequence[float]], statistic: Callable = statistics.median) -> float:
    """The smallest per-launch ``statistic`` of the step times (s): the fastest launch's."""
    return min(statistic(s) for s in steps if len(s))


def fastest_median(steps: Sequence[Sequence[float]]) -> float:
    return fastest(steps, statistics.median)


def noise_threshold(steps: Sequence[Sequence[float]], floor: float = FLOOR,
                    statistic: Callable = statistics.median) -> float:
    """How much the location (the fastest launch's ``statistic``) moves on the baseline alone (a
    fraction): jackknife over repeats, or with one repeat the gap between its halves; at least ``floor``."""
    steps = [list(s) for s in steps if len(s)]
    if len(steps) >= 2:
        full = fastest(steps, statistic)
        moves = [abs(full / fastest(steps[:i] + steps[i + 1:], statistic) - 1) for i in range(len(steps))]
    else:
        only = steps[0]
        half = len(only) // 2
        if half < 2:
            return max(floor, 1.0)  # nothing to learn from: only huge changes count
        a, b = statistic(only[:half]), statistic(only[half:])
        moves = [abs(a / b - 1)]
    return max(floor, max(moves))


def _judge(change: float, threshold: float, p: float, low: float, high: float, alpha: float) -> str:
    if p < alpha and change < -threshold and high < 0:
        return REGRESSION
    if p < alpha and change > threshold and low > 0:
        return IMPROVEMENT
    return SAME


def compare_sides(base: Side, cur: Side, *, alpha: float = ALPHA, floor: float = FLOOR, nested: bool = True) -> dict:
    """The statistics and verdict of one configuration measured on both sides.

    First the typical step (the fastest launch's median step time, the U test); where that finds no
    change, the whole window (the fastest launch's mean step time, i.e. throughput, Welch's t test):
    throughput that moved beyond its own noise *and* further than the typical step did is a stall in
    some steps (or its end), judged on the window's statistics, or ``inconclusive`` without their evidence.
    ``nested``: the window's test with launches and steps as two levels (False: Welch's t of the pooled
    steps, the rule before, kept for benchmarks/compare_verdicts.py).
    """
    change = base.location() / cur.location() - 1
    threshold = noise_threshold(base.steps, floor)
    p = mann_whitney_p(base.steps, cur.steps)
    low, high = bootstrap_ci(base.steps, cur.steps)
    typical = {"change": change, "threshold": threshold, "p_value": p, "ci_low": low, "ci_high": high,
               "verdict": _judge(change, threshold, p, low, high, alpha), "note": "", "by_window": False}
    if typical["verdict"] != SAME:
        return typical
    window = base.window_location() / cur.window_location() - 1
    window_threshold = noise_threshold(base.steps, floor, statistics.fmean)
    if abs(window) <= 2 * window_threshold or abs(window - change) <= window_threshold or window * (window - change) < 0:
        return typical
    two_levels = nested_t(base.steps, cur.steps) if nested else None
    if two_levels is not None:  # launches and steps as two levels: each launch's window is one observation
        _, wp, wlow, whigh = two_levels
        test = "the launches' t"
    else:
        wp = welch_p(base.steps, cur.steps)
        wlow, whigh = bootstrap_ci(base.steps, cur.steps, statistic=np.mean)
        test = "Welch"
    verdict = _judge(window, window_threshold, wp, wlow, whigh, alpha)
    note = (f"throughput {window:+.1%}, the median step {change:+.1%}: "
            f"{'slower' if window < 0 else 'faster'} in some steps")
    if verdict == SAME:
        verdict = INCONCLUSIVE
        note += (f", not significant ({test} p {wp:.2g}; 95% CI {wlow:+.1%} .. {whigh:+.1%}): more repeats or "
                 "steps")
    return {"change": window, "threshold": window_threshold, "p_value": wp, "ci_low": wlow, "ci_high": whigh,
            "verdict": verdict, "note": note, "by_window": True}


# ---------------------------------------------------------------- tables of results


def _side(group: pd.DataFrame) -> Side:
    """Every ``ok`` repeat with step times (busy or not)."""
    ok = group[(group["status"] == Status.OK.value) & group["step_times_s"].notna()]
    return Side(steps=tuple(tuple(json.loads(s)) for s in ok["step_times_s"]),
                throughputs=tuple(float(t) for t in ok["throughput"]))


@dataclass(frozen=True)
class Repeats:
    """One side's rows of a configuration, sorted by what they can say."""

    quiet: Side  # ok, finite step times, machine not busy (or not sampled)
    busy: Side  # ok, finite step times, measured on a busy machine
    busy_notes: tuple[str, ...]
    not_finite: int  # ok rows whose step times are not all finite and positive
    failed: tuple[tuple[str, str], ...]  # (status, reason) of rows that did not complete, skips aside
    skipped: tuple[str, ...]  # reasons
    total: int


def _finite_steps(text: str) -> tuple[float, ...] | None:
    try:
        steps = tuple(float(t) for t in json.loads(text))
    except (TypeError, ValueError):
        return None
    return steps if steps and all(math.isfinite(t) and t > 0 for t in steps) else None


def repeats_of(group: pd.DataFrame) -> Repeats:
    quiet, busy, notes, bad, failed, skipped = [], [], [], 0, [], []
    for row in group.to_dict("records"):
        status, reason = str(row["status"]), row.get("reason")
        reason = str(reason) if isinstance(reason, str) else ""
        if status == Status.SKIPPED.value:
            skipped.append(reason)
        elif status != Status.OK.value:
            failed.append((status, reason))
        elif (steps := _finite_steps(row.get("step_times_s"))) is None:
            bad += 1
        elif results.is_busy(row):
            busy.append(steps)
            notes.append(results.busy_figure(row))
        else:
            quiet.append(steps)
    side = lambda steps: Side(tuple(steps), ())  # noqa: E731
    return Repeats(side(quiet), side(busy), tuple(notes), bad, tuple(failed), tuple(skipped), len(group))


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else repr(value)


def check_alpha(alpha: float) -> float:
    """``alpha`` if it is a significance level (0 < alpha < 1), else a UserError naming it."""
    if not isinstance(alpha, (int, float)) or not 0 < alpha < 1:  # NaN fails both comparisons
        raise UserError(f"--alpha {_shown(alpha)}: a significance level between 0 and 1 (exclusive), e.g. {ALPHA}")
    return float(alpha)


def check_floor(floor: float) -> float:
    """``floor`` if it is a fraction of throughput (0 <= floor < 1), else a UserError naming it."""
    if not isinstance(floor, (int, float)) or not 0 <= floor < 1:
        raise UserError(f"--floor {_shown(floor)}: the smallest noise threshold, a fraction of throughput from 0 to "
                        f"below 1, e.g. {FLOOR}")
    return float(floor)


def label_of(row: pd.Series) -> str:
    """A configuration in a few words, with the start of its config_id (for ``history --config``)."""
    launcher = f" {row['launcher']}" if "launcher" in row and pd.notna(row["launcher"]) else ""
    return (f"{row['framework']} {row['workload']}/{row['size']} {row['nodes']}x{row['procs_per_node']} "
            f"b{row['batch_per_worker']} {row['strategy']} {row['storage']}{launcher} ({str(row['config_id'])[:8]})")


def provenance_changes(base: pd.DataFrame, cur: pd.DataFrame) -> tuple[str, ...]:
    """Each provenance fact whose values differ between the sides, as "field: old -> new"."""
    return facts_changes(provenance_facts(base.to_dict("records")), provenance_facts(cur.to_dict("records")))


def provenance_facts(rows: Sequence[dict]) -> dict[str, tuple[str, ...]]:
    """Per provenance field, the distinct values the rows hold (as text, sorted; empty ones left out)."""
    return {name: tuple(sorted({str(r[name]) for r in rows if r.get(name) is not None and not pd.isna(r[name])}))
            for name in PROVENANCE_FIELDS}


def facts_changes(old_facts: dict[str, tuple[str, ...]], new_facts: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The fields whose values differ between two :func:`provenance_facts`, as "field: old -> new"."""
    changes = []
    for name in PROVENANCE_FIELDS:
        old, new = old_facts[name], new_facts[name]
        if old == new:
            continue
        if name == "versions" and len(old) == 1 and len(new) == 1:
            a, b = json.loads(old[0]), json.loads(new[0])
            diffs = [f"{k} {a.get(k, '-')} -> {b.get(k, '-')}" for k in sorted(set(a) | set(b))
                     if a.get(k) != b.get(k)]
            changes.append("versions: " + ", ".join(diffs))
        else:
            changes.append(f"{name}: {', '.join(old) or '-'} -> {', '.join(new) or '-'}")
    return tuple(changes)


def compare_tables(baseline: pd.DataFrame, current: pd.DataFrame, *, alpha: float = ALPHA,
                   floor: float = FLOOR) -> list[Cell]:
    """One :class:`Cell` per configuration present on either side, baseline order first."""
    alpha, floor = check_alpha(alpha), check_floor(floor)
    cells = []
    for config_id in dict.fromkeys(list(baseline["config_id"]) + list(current["config_id"])):
        b = baseline[baseline["config_id"] == config_id]
        c = current[current["config_id"] == config_id]
        first = (b if len(b) else c).iloc[0]
        common = {"config_id": config_id, "label": label_of(first), "unit": str(first["sample_unit"]),
                  "alpha": alpha}
        cells.append(_cell(b, c, int(first["global_batch"]), common, alpha, floor))
    return cells


def _cell(b: pd.DataFrame, c: pd.DataFrame, batch: int, common: dict, alpha: float, floor: float) -> Cell:
    """The comparison of one configuration's rows on both sides."""
    br, cr = repeats_of(b), repeats_of(c)
    b_measured = br.quiet.repeats + br.busy.repeats + br.not_finite
    c_measured = cr.quiet.repeats + cr.busy.repeats + cr.not_finite
    if len(b) and not b_measured and not c_measured and cr.skipped and not cr.failed:
        return Cell(verdict=SKIPPED, note=f"skipped on both sides: {cr.skipped[0]}", **common)
    if not len(b) or not b_measured:
        note = "not in the baseline" if not len(b) else "nothing measured in the baseline"
        return Cell(verdict=NEW, current_repeats=c_measured, note=note, **common)
    if not len(c):
        return Cell(verdict=MISSING, baseline_repeats=b_measured, note="not run in current", **common)
    provenance = provenance_changes(b, c)
    if not c_measured:
        verdict = FAILED if cr.failed else SKIPPED
        first = cr.failed[0] if cr.failed else (SKIPPED, cr.skipped[0] if cr.skipped else "")
        statuses = ", ".join(sorted({status for status, _ in cr.failed} or {SKIPPED}))
        note = statuses + (f": {first[1]}" if first[1] else "")
        return Cell(verdict=verdict, baseline_repeats=b_measured, provenance=provenance, note=note, **common)
    counts = {"baseline_repeats": b_measured, "current_repeats": c_measured, "provenance": provenance}
    bad = [f"{r.not_finite} of {r.total} {name} repeats" for name, r in (("baseline", br), ("current", cr))
           if r.not_finite]
    if bad:
        return Cell(verdict=NOT_JUDGED, note=f"step times not finite (NaN, infinite or not positive) in "
                                             f"{' and '.join(bad)}", **counts, **common)
    bs, cs = br.quiet if br.quiet.repeats else br.busy, cr.quiet if cr.quiet.repeats else cr.busy
    stats = compare_sides(bs, cs, alpha=alpha, floor=floor)
    note, by_window = stats.pop("note"), stats.pop("by_window")
    notes = [note] if note else []
    busy_sides = [name for name, r in (("baseline", br), ("current", cr)) if not r.quiet.repeats]
    if busy_sides:
        figure = (cr if "current" in busy_sides else br).busy_notes[0]
        notes.insert(0, f"machine busy in the {' and '.join(busy_sides)} ({figure}): would be {stats['verdict']}")
        stats["verdict"] = NOT_JUDGED
    elif stats["verdict"] in (REGRESSION, IMPROVEMENT) and min(bs.repeats, cs.repeats) < MIN_LAUNCHES:
        notes.insert(0, f"{stats['verdict']} by the statistics, from {bs.repeats}/{cs.repeats} launches; a "
                        f"verdict needs {MIN_LAUNCHES} a side")
        stats["verdict"] = INCONCLUSIVE
    notes += _left_out(br, "baseline") + _left_out(cr, "current")
    location = (lambda side: side.window_location()) if by_window else (lambda side: side.location())
    moved = where_moved(b, c)
    return Cell(baseline_rate=batch / location(bs), current_rate=batch / location(cs),
                note="; ".join(notes), where=moved.text() if moved else "", **{**counts, "baseline_repeats": bs.repeats, "current_repeats": cs.repeats},
                **stats, **common)


def _left_out(r: Repeats, name: str) -> list[str]:
    """The repeats a verdict did not use: busy ones beside quiet ones, failed ones (named)."""
    notes = []
    if r.quiet.repeats and r.busy.repeats:
        notes.append(f"{r.busy.repeats} of {r.total} {name} repeats left out: machine busy ({r.busy_notes[0]})")
    if r.failed:
        status, reason = r.failed[0]
        notes.append(f"{len(r.failed)} of {r.total} {name} repeats {status}" + (f": {reason}" if reason else ""))
    return notes


def gate_failed(cells: Sequence[Cell]) -> bool:
    """True when a CI gate should fail: a significant regression, or a run that failed now (inconclusive,
    not judged and skipped do not)."""
    return any(c.verdict in GATE_FAILING for c in cells)
