"""The verdicts of ``rosetta compare`` as a terminal table (rich), then every provenance difference in
words; the machine-readable forms are in :mod:`harness.reports.ci_reports`."""

from __future__ import annotations

import math
from typing import Sequence

from harness.results.compare import (ALPHA, FAILED, IMPROVEMENT, INCONCLUSIVE, MIN_LAUNCHES, MISSING, NEW, NOT_JUDGED,
                                     REGRESSION, SAME, SKIPPED, Cell)

COLOUR = {REGRESSION: "red", FAILED: "red", IMPROVEMENT: "green", SAME: "white", MISSING: "yellow", NEW: "yellow",
          INCONCLUSIVE: "yellow", NOT_JUDGED: "yellow", SKIPPED: "white"}


def print_comparison(cells: Sequence[Cell], console=None, title: str = "") -> None:
    """The comparison as a rich table, then every provenance difference in words."""
    from rich.console import Console
    from rich.markup import escape
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
