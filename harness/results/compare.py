"""Compare two sets of results configuration by configuration, with a noise-aware verdict.

Rows are matched by ``config_id`` (the full configuration: every dimension, the
workload options and the seed). For each configuration the raw per-step samples
of every repeat (``step_times_s``) are used, not only the per-repeat summary:

* location of a side = the fastest launch's median step time (s). Each repeat's
  median discards spikes inside a run; taking the fastest of the repeats discards
  launches slowed by the machine, because on a shared machine timing noise only
  ever adds time (Chen & Revels 2016, "Robust benchmarking in noisy environments",
  the rule BenchmarkTools.jl uses);
* change = baseline location / current location - 1, in throughput terms: -0.10
  means the current code processes 10% fewer samples per second;
* noise threshold, learned from the baseline's own spread: the largest change the
  location shows when one baseline repeat is left out (a jackknife; with a single
  repeat, the gap between the medians of its two halves), never below ``floor``;
* significance: a two-sided Mann-Whitney U test (scipy) of the pooled per-step
  times of the two sides;
* a 95% confidence interval of the change by a two-level bootstrap (repeats, then
  steps within each repeat), so that launch-to-launch variation is in it.

A change is a regression (or an improvement) only when it is beyond the threshold,
the U test gives p < ``alpha`` *and* the bootstrap interval excludes zero (the U
test alone treats every step as independent and so is overconfident when whole
launches shift; the interval is not). Provenance (hardware and software facts) is
compared for every configuration and every difference is reported next to it.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from harness.base.errors import UserError
from harness.contract.axes import Status
from harness.results import table as results

# Facts that must match for a comparison to mean "same machine, same software".
HARDWARE_FIELDS = ("cpu_model", "cpu_cores", "gpu_model", "gpu_count", "gpu_driver")
SOFTWARE_FIELDS = ("framework_version", "versions", "harness_version", "harness_commit")
PROVENANCE_FIELDS = HARDWARE_FIELDS + SOFTWARE_FIELDS

ALPHA = 0.01  # significance level of the U test
FLOOR = 0.03  # the smallest threshold, as a fraction of throughput (2-4% launch-to-launch here)

REGRESSION, IMPROVEMENT, SAME, FAILED, MISSING, NEW = (
    "regression", "improvement", "no change", "failed", "missing", "new")


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
        return fastest_median(self.steps)


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


def fastest_median(steps: Sequence[Sequence[float]]) -> float:
    return min(statistics.median(s) for s in steps if len(s))


def noise_threshold(steps: Sequence[Sequence[float]], floor: float = FLOOR) -> float:
    """How much the location moves on the baseline alone (a fraction): jackknife over repeats,
    or with one repeat the gap between its halves; at least ``floor``."""
    steps = [list(s) for s in steps if len(s)]
    if len(steps) >= 2:
        full = fastest_median(steps)
        moves = [abs(full / fastest_median(steps[:i] + steps[i + 1:]) - 1) for i in range(len(steps))]
    else:
        only = steps[0]
        half = len(only) // 2
        if half < 2:
            return max(floor, 1.0)  # nothing to learn from: only huge changes count
        a, b = statistics.median(only[:half]), statistics.median(only[half:])
        moves = [abs(a / b - 1)]
    return max(floor, max(moves))


def bootstrap_ci(base: Sequence[Sequence[float]], cur: Sequence[Sequence[float]], *, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """95% interval of the change (throughput fraction) by resampling repeats, then steps."""
    rng = np.random.default_rng(seed)
    base = [np.asarray(s, dtype=float) for s in base if len(s)]
    cur = [np.asarray(s, dtype=float) for s in cur if len(s)]

    def location(side: list[np.ndarray]) -> np.ndarray:
        # per resample: pick repeats with replacement, resample each one's steps, take the fastest median
        picks = rng.integers(0, len(side), size=(resamples, len(side)))
        out = np.full(resamples, np.inf)
        for col in range(len(side)):
            for idx in np.unique(picks[:, col]):
                rows = np.nonzero(picks[:, col] == idx)[0]
                s = side[idx]
                med = np.median(s[rng.integers(0, len(s), size=(len(rows), len(s)))], axis=1)
                out[rows] = np.minimum(out[rows], med)
        return out

    change = location(base) / location(cur) - 1
    low, high = np.percentile(change, [2.5, 97.5])
    return float(low), float(high)


def mann_whitney_p(base: Sequence[Sequence[float]], cur: Sequence[Sequence[float]]) -> float:
    from scipy.stats import mannwhitneyu

    a = [t for s in base for t in s]
    b = [t for s in cur for t in s]
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def compare_sides(base: Side, cur: Side, *, alpha: float = ALPHA, floor: float = FLOOR) -> dict:
    """The statistics and verdict of one configuration measured on both sides."""
    change = base.location() / cur.location() - 1
    threshold = noise_threshold(base.steps, floor)
    p = mann_whitney_p(base.steps, cur.steps)
    low, high = bootstrap_ci(base.steps, cur.steps)
    if p < alpha and change < -threshold and high < 0:
        verdict = REGRESSION
    elif p < alpha and change > threshold and low > 0:
        verdict = IMPROVEMENT
    else:
        verdict = SAME
    return {"change": change, "threshold": threshold, "p_value": p, "ci_low": low, "ci_high": high,
            "verdict": verdict}


# ---------------------------------------------------------------- tables of results


def load_source(source: str | Path, sweep: str | None = None) -> pd.DataFrame:
    """Rows of a results folder or a results Parquet file; ``sweep``: an id, ``all``, or None
    for the latest sweep in the source."""
    path = Path(source)
    if path.is_dir():
        table = results.load(path)
    elif path.is_file() and path.suffix == ".parquet":
        table = pd.read_parquet(path).astype(results.COLUMNS)
    else:
        raise UserError(f"{source}: not a results folder or a .parquet file")
    if table.empty:
        raise UserError(f"{source}: no results in it")
    if sweep == "all":
        return table
    if sweep is None:
        sweep = str(table.sort_values("timestamp")["sweep_id"].iloc[-1])
    if sweep not in set(table["sweep_id"]):
        raise UserError(f"{source}: no sweep {sweep!r}; sweeps: {', '.join(sorted(set(table['sweep_id'])))}")
    return table[table["sweep_id"] == sweep]


def previous_sweep(source: str | Path) -> str:
    """The sweep before the latest in a results folder or file (to compare a store with itself)."""
    table = load_source(source, "all")
    order = table.sort_values("timestamp").drop_duplicates("sweep_id", keep="last")["sweep_id"].tolist()
    if len(order) < 2:
        raise UserError(f"{source}: only one sweep ({order[0]}); name two sources or two sweeps to compare")
    return str(order[-2])


def _side(group: pd.DataFrame) -> Side:
    ok = group[(group["status"] == Status.OK.value) & group["step_times_s"].notna()]
    return Side(steps=tuple(tuple(json.loads(s)) for s in ok["step_times_s"]),
                throughputs=tuple(float(t) for t in ok["throughput"]))


def label_of(row: pd.Series) -> str:
    """A configuration in a few words, with the start of its config_id (for ``history --config``)."""
    launcher = f" {row['launcher']}" if "launcher" in row and pd.notna(row["launcher"]) else ""
    return (f"{row['framework']} {row['workload']}/{row['size']} {row['nodes']}x{row['procs_per_node']} "
            f"b{row['batch_per_worker']} {row['strategy']} {row['storage']}{launcher} ({str(row['config_id'])[:8]})")


def provenance_changes(base: pd.DataFrame, cur: pd.DataFrame) -> tuple[str, ...]:
    """Each provenance fact whose values differ between the sides, as "field: old -> new"."""
    changes = []
    for name in PROVENANCE_FIELDS:
        old = sorted({str(v) for v in base[name].dropna()})
        new = sorted({str(v) for v in cur[name].dropna()})
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
    cells = []
    ids = list(dict.fromkeys(list(baseline["config_id"]) + list(current["config_id"])))
    for config_id in ids:
        b = baseline[baseline["config_id"] == config_id]
        c = current[current["config_id"] == config_id]
        first = (b if len(b) else c).iloc[0]
        common = {"config_id": config_id, "label": label_of(first), "unit": str(first["sample_unit"])}
        bs, cs = _side(b), _side(c)
        if not len(b) or not bs.repeats:
            note = "not in the baseline" if not len(b) else "nothing measured in the baseline"
            cells.append(Cell(verdict=NEW, current_repeats=cs.repeats, note=note, **common))
            continue
        if not len(c):
            cells.append(Cell(verdict=MISSING, baseline_repeats=bs.repeats, note="not run in current", **common))
            continue
        provenance = provenance_changes(b, c)
        if not cs.repeats:
            reasons = c["reason"].dropna()
            note = ", ".join(sorted(set(c["status"]))) + (f": {reasons.iloc[0]}" if len(reasons) else "")
            cells.append(Cell(verdict=FAILED, baseline_repeats=bs.repeats, provenance=provenance,
                              note=note, **common))
            continue
        stats = compare_sides(bs, cs, alpha=alpha, floor=floor)
        batch = int(first["global_batch"])
        cells.append(Cell(baseline_rate=batch / bs.location(), current_rate=batch / cs.location(),
                          baseline_repeats=bs.repeats, current_repeats=cs.repeats, provenance=provenance,
                          **stats, **common))
    return cells


def gate_failed(cells: Sequence[Cell]) -> bool:
    """True when a CI gate should fail: a significant regression, or a run that failed now."""
    return any(c.verdict in (REGRESSION, FAILED) for c in cells)
