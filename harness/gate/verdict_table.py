"""The verdicts of ``rosetta compare`` as a terminal table (rich), then every provenance difference in
words; the machine-readable forms are in :mod:`harness.gate.ci_reports`."""

from __future__ import annotations

import math
from typing import Sequence

from harness.gate.compare import (
    ALPHA,
    FAILED,
    IMPROVEMENT,
    INCONCLUSIVE,
    MIN_LAUNCHES,
    MISSING,
    NEW,
    NOT_JUDGED,
    REGRESSION,
    SAME,
    SKIPPED,
    Cell,
)

COLOUR = {REGRESSION: "red", FAILED: "red", IMPROVEMENT: "green", SAME: "white", MISSING: "yellow", NEW: "yellow",
          INCONCLUSIVE: "yellow", NOT_JUDGED: "yellow", SKIPPED: "white"}


def print_comparison(cells: Sequence[Cell], console=None, title: str = "") -> None:
    """The comparison as a rich table, then every provenance difference in words."""
    from rich.console import Console
    from harness.base.escaping import terminal as escape
    from rich.table import Table

    console = console or Console()
    table = Table(title=escape(title or "rosetta compare"))
    for col, justify in [("configuration", "left"), ("baseline", "right"), ("current", "right"),
                         ("change", "right"), ("change 95% CI (bootstrap)", "right"), ("noise", "right"), ("p", "right"),
                         ("repeats", "right"), ("verdict", "left"), ("provenance", "left")]:
        table.add_column(col, justify=justify)
    colour = COLOUR
    for c in cells:
        measured = not math.isnan(c.change)
        table.add_row(
            escape(c.label),
            f"{c.baseline_rate:.1f}" if measured else "-",
            f"{c.current_rate:.1f}" if measured else "-",
            f"{c.change:+.1%}" if measured else "-",
            f"{c.ci_low:+.1%} .. {c.ci_high:+.1%}" if measured else "-",
            f"±{c.threshold:.1%}" if measured else "-",
            f"{c.p_value:.2g}" if measured else "-",
            f"{c.baseline_repeats}/{c.current_repeats}",
            f"[{colour[c.verdict]}]{c.verdict}[/{colour[c.verdict]}]" + (f" ({escape(c.note)})" if c.note else ""),
            "[yellow]differs[/yellow]" if c.provenance else "same",
        )
    console.print(table)
    alpha = cells[0].alpha if cells else ALPHA
    console.print("baseline/current: samples/s of the fastest launch (global batch / its median step time, or its "
                  "mean where the note says throughput); change: in throughput, negative = slower; p: U test of the "
                  "step times (Welch's t of their means where the note says throughput); noise: threshold "
                  f"learned from the baseline's own spread; verdict needs |change| > noise, p < {alpha:g}, a CI that "
                  f"excludes 0 and {MIN_LAUNCHES} launches a side (else inconclusive); a side measured on a busy "
                  "machine is not judged", highlight=False)
    for c in cells:
        for line in c.provenance:
            console.print(f"[yellow]provenance differs[/yellow] for {escape(c.label)}: {escape(line)}",
                          highlight=False)
        if c.where:
            console.print(f"[cyan]where[/cyan] {escape(c.label)}: {escape(c.where)}", highlight=False)


DETAILED = 3  # with more series than this, only the ones with something to show get their sweep-by-sweep table


def print_history(all_series, console=None, alpha: float = ALPHA) -> None:
    """Each series (configuration on a machine) with a step, an outlier, a trend or a verdict other than
    "no change" (every series when there are few) as a table of its sweeps; then one line per series."""
    from rich.console import Console

    console = console or Console()
    for s in all_series:
        if len(all_series) <= DETAILED or s.steps or s.outliers or s.trends or s.verdict.verdict != "no change":
            _print_sweeps(s, console)
    _print_summary(all_series, console)
    unit = all_series[0].unit if all_series else "samples"
    console.print(f"{unit}/s: each sweep's figure from its launches (each launch: global batch / its mean step time "
                  "without the slowest tenth of steps; slowed launches modelled, busy ones left out); level: the "
                  f"fitted level or trend at that sweep; a step is confirmed at p < {alpha / 10:g}, the newest sweeps "
                  f"suspected at p < {alpha:g} (and beyond the floor); CI fails on the sweep that confirms a step down, "
                  "once; min. detectable: the step down confirmed with 80% power from 3 sweeps", highlight=False)


def _print_sweeps(s, console) -> None:
    from harness.base.escaping import terminal as escape
    from rich.table import Table

    steps = {st.sweep_id: st for st in s.steps}
    table = Table(title=escape(f"{s.label} on {s.machine}"))
    rate = f"{escape(s.unit)}/s"
    for col in ("when (UTC)", "sweep", "launches", rate, "level", "vs level", "step", "what changed"):
        table.add_column(col, justify="right" if col in ("launches", rate, "level", "vs level") else "left")
    for p in s.points:
        judged = not math.isnan(p.rate)
        step = steps.get(p.sweep_id)
        mark = (f"[{'red' if step.direction == 'down' else 'green'}]{step.verdict} step {step.direction} "
                f"{step.change:+.1%}[/]") if step else escape(p.label)
        table.add_row(p.timestamp.replace("+00:00", ""), escape(p.sweep_id), str(p.repeats),
                      f"{p.rate:.1f}" if judged else "-", f"{p.fitted:.1f}" if judged else "-",
                      f"{p.rate / p.fitted - 1:+.1%}" if judged and p.fitted else "-", mark,
                      escape("; ".join(step.causes if step else p.provenance)))
    console.print(table)
    for lv in s.trends:
        console.print(f"trend {lv.slope:+.2%} per sweep from {escape(lv.first)} to {escape(lv.last)} "
                      f"({lv.rate:.1f} -> {lv.end_rate:.1f} {escape(s.unit)}/s)", highlight=False)


def _print_summary(all_series, console) -> None:
    """One line per series: its newest sweep's verdict, steps, trends, outliers and noise."""
    from harness.base.escaping import terminal as escape
    from rich.table import Table

    table = Table(title="rosetta history: the newest sweep of each configuration on each machine")
    for col in ("configuration", "machine", "sweeps", "newest", "verdict", "change", "steps", "trend", "outliers",
                "noise", "min. detectable"):
        table.add_column(col, justify="right" if col in ("sweeps", "change", "outliers", "noise", "min. detectable")
                         else "left")
    for s in sorted(all_series, key=lambda s: not s.verdict.fails):
        v = s.verdict
        colour = ("red" if v.fails else "yellow" if v.verdict == "regression" else "green" if v.verdict == "improvement"
                  else "white")
        canary = f"; canary {s.canary.note}" if s.canary and s.canary.blind else ""
        table.add_row(
            escape(s.label), escape(s.machine), str(len(s.points)), escape(v.sweep_id),
            f"[{colour}]{v.verdict}{f' ({v.status})' if v.status else ''}[/]"
            + (f" {escape(v.note)}" if v.note else "") + escape(canary),
            f"{v.change:+.1%}" if not math.isnan(v.change) else "-",
            escape(", ".join(f"{st.direction} {st.change:+.1%} at {st.sweep_id}" for st in s.steps)) or "-",
            ", ".join(f"{t.slope:+.2%}/sweep" for t in s.trends) or "-", str(len(s.outliers)),
            f"±{s.noise:.1%}" if not math.isnan(s.noise) else "-", f"{-s.mde:+.1%}" if not math.isnan(s.mde) else "-")
    console.print(table)
