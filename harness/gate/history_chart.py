"""The history chart: an overview of every series, then a panel per series with something to show;
throughput relative to its first level (so a 5% step reads as 5%, not as a flat line over an axis from 0),
on a time axis of dates, with its levels and trends drawn and its steps and outliers marked."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

from harness.gate.history import Series
from harness.reports.charts import no_data_figure, save_figure

MAX_PANELS = 12  # series drawn in panels of their own; the overview draws every series
FEW = 3  # up to this many series, each has its panel even with nothing to show


def default_path(sources: Sequence[Path]) -> Path:
    """Beside the first source's results (its folder, or the folder of its .parquet file)."""
    first = Path(sources[0])
    return (first if first.is_dir() else first.parent) / "history.png"


def worth_a_panel(s: Series) -> bool:
    return bool(s.steps or s.outliers or s.trends or s.verdict.verdict not in ("no change", "not judged"))


def plot(all_series: Sequence[Series], path: Path) -> Path:
    """With several series, an overview of them all (each relative to its first level); then a panel per
    series with a step, an outlier, a trend or a verdict (every series when there are few): launches
    (dots), sweeps (markers), levels and trends (lines), confirmed steps (dashed), a suspected change
    (dotted), outliers circled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    drawn = [s for s in all_series if any(not math.isnan(p.rate) for p in s.points)]
    if not drawn:
        return no_data_figure(path, "rosetta history", "nothing measured: no sweep of any series has an ok run")
    detailed = drawn if len(drawn) <= FEW else [s for s in drawn if worth_a_panel(s)]
    shown = detailed[:MAX_PANELS]
    overview = len(drawn) > FEW
    rows = len(shown) + overview
    fig, axes = plt.subplots(rows, 1, figsize=(10, 2.7 * rows + 0.6), squeeze=False)
    if overview:
        _overview(axes[0, 0], drawn, mdates)
    for ax, s in zip(axes[overview:, 0], shown):
        _panel(ax, s, mdates)
    quiet = len(drawn) - len(detailed)
    note = (f"; {quiet} series with nothing to show are in the overview only" if quiet else "") + (
        f"; {len(detailed) - len(shown)} more series with steps are not drawn" if len(detailed) > len(shown) else "")
    fig.suptitle("Throughput relative to each series' first level; lines: levels and trends; dashed: a step, "
                 f"dotted: suspected{note}", fontsize=9)
    return save_figure(fig, path)


def _when(stamp: str):
    t = pd.Timestamp(stamp)
    return t.tz_convert(None) if t.tzinfo is not None else t


def _dates(ax, mdates) -> None:
    locator = mdates.AutoDateLocator(minticks=3, maxticks=8)  # maxticks alone warns on spans of hours
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)


def _overview(ax, drawn: Sequence[Series], mdates) -> None:
    """Every series' sweeps relative to its first level, one line each; regressions in red."""
    for s in drawn:
        judged = [p for p in s.points if not math.isnan(p.rate)]
        base = s.levels[0].rate if s.levels else judged[0].rate
        ax.plot([_when(p.timestamp) for p in judged], [100 * (p.rate / base - 1) for p in judged], lw=1,
                color="red" if s.verdict.fails else None, alpha=0.9 if s.verdict.fails else 0.5)
    ax.axhline(0, color="0.5", lw=0.6)
    ax.set_ylabel("% vs first level", fontsize=8)
    failing = sum(s.verdict.fails for s in drawn)
    ax.set_title(f"all {len(drawn)} series ({failing} regressed on the newest sweep, in red)", fontsize=8)
    _dates(ax, mdates)


def _panel(ax, s: Series, mdates) -> None:
    when = {p.sweep_id: _when(p.timestamp) for p in s.points}
    judged = [p for p in s.points if not math.isnan(p.rate)]
    base = s.levels[0].rate if s.levels else judged[0].rate

    def rel(v: float) -> float:
        return 100 * (v / base - 1)

    ax.scatter([when[p.sweep_id] for p in judged for _ in p.launch_rates],
               [rel(r) for p in judged for r in p.launch_rates], s=6, color="0.7", label="launch", zorder=1)
    ax.plot([when[p.sweep_id] for p in judged], [rel(p.rate) for p in judged], "o", ms=4, color="C0",
            label="sweep (median of launches)", zorder=3)
    for lv in s.levels:
        ax.plot([when[lv.first], when[lv.last]], [rel(lv.rate), rel(lv.end_rate)], color="C1", lw=2, zorder=2,
                label="level / trend" if lv is s.levels[0] else None)
        if lv.slope:
            ax.annotate(f"trend {lv.slope:+.2%}/sweep", (when[lv.last], rel(lv.end_rate)), textcoords="offset points",
                        xytext=(-4, -12), ha="right", fontsize=7, color="C1")
    out = [p for p in judged if p.sweep_id in s.outliers]
    ax.scatter([when[p.sweep_id] for p in out], [rel(p.rate) for p in out], s=70, facecolors="none",
               edgecolors="red", label="outlier" if out else None, zorder=4)
    for st in (st for st in s.steps if not st.drift):  # a drift's later steps are its trend's
        colour = "red" if st.direction == "down" else "green"
        ax.axvline(when[st.sweep_id], color=colour, ls="--" if st.verdict == "confirmed" else ":", lw=1, alpha=0.8)
        suspected = st.verdict != "confirmed"  # the newest sweep: its label goes left of the line
        ax.annotate(f"{st.change:+.1%}" + (" suspected" if suspected else ""), (when[st.sweep_id], 0.0),
                    xycoords=("data", "axes fraction"), textcoords="offset points",
                    xytext=(-3 if suspected else 3, 4), ha="right" if suspected else "left", fontsize=7, color=colour)
    values = [rel(r) for p in judged for r in p.launch_rates] + [rel(p.rate) for p in judged]
    low, high = min(values), max(values)
    pad = max(1.0, 0.15 * (high - low))
    ax.set_ylim(low - 1.5 * pad, high + 2.5 * pad)  # around the data; room for the step labels below, the legend above
    ax.axhline(0, color="0.5", lw=0.6)
    ax.set_ylabel(f"% vs {base:.3g} {s.unit}/s", fontsize=8)
    _dates(ax, mdates)
    ax.set_title(f"{s.label} on {s.machine}", fontsize=8)
    ax.legend(fontsize=6, loc="upper left", ncol=5)
