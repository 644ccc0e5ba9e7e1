"""The summary as charts (matplotlib, PNG): scaling, strategies, telemetry, frameworks, step times (the storage
axis's chart: storage_charts)."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pandas as pd

from harness.base import nofollow
from harness.contract.axes import Status
from harness.reports.aggregate import CONFIG_KEYS, NUMERICS, SERIES_KEYS


def save_figure(fig, path: Path) -> Path:
    """Lay out, write (PNG, 110 dpi, the folder made if needed) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    with nofollow.open_write(path) as out:  # a link planted where the chart goes is not written through
        fig.savefig(out, dpi=110, format="png")
    plt.close(fig)
    return path


def count_axis(ax, counts, label: str) -> None:
    """``ax``'s x axis of counts (GPUs, workers, tau) on a log2 scale, a tick at each count present."""
    ax.set_xscale("log", base=2)
    ticks = sorted(set(int(n) for n in counts))
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel(label)


def nothing_measured(summary: pd.DataFrame) -> str:
    """Why a chart of throughput has nothing to show: the statuses of the sweep's configurations."""
    joined = summary["status"].dropna() if "status" in summary else []
    statuses = sorted({s for line in joined for s in line.split(", ")})
    return ("nothing measured: no run of this sweep succeeded"
            + (f" (statuses: {', '.join(statuses)})" if statuses else " (no runs)"))


def no_data_figure(path: Path, title: str, message: str) -> Path:
    """A chart that says it has no data, instead of empty axes running from 0 to 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 2.5))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, wrap=True, transform=ax.transAxes)
    return save_figure(fig, path)


# What the error bars of every throughput chart are (the summary's interval; never below zero).
ERROR_BARS = "min-max of the repeats below 3 repeats, else 95% CI of the geometric mean"


def error_bars(y: pd.Series, rows: pd.DataFrame) -> list[pd.Series]:
    """Matplotlib's [below, above] error lengths from the summary's interval (0 where none)."""
    y = pd.Series(y).reset_index(drop=True)
    low = pd.Series(rows["interval_low"]).reset_index(drop=True).astype(float)
    high = pd.Series(rows["interval_high"]).reset_index(drop=True).astype(float)
    return [(y - low).fillna(0).clip(lower=0), (high - y).fillna(0).clip(lower=0)]


def baseline_note(summary: pd.DataFrame) -> str:
    """The efficiency baseline(s) the summary used, for a chart's title ("" if none)."""
    if "efficiency_baseline" not in summary:
        return ""
    used = sorted(set(summary["efficiency_baseline"].dropna()))
    # one baseline per framework can run past the figure's width: wrapped, never cut
    return "\n" + "\n".join(textwrap.wrap(f"efficiency vs {'; '.join(used)}", 150)) if used else ""


BUSY_LABEL = "measured on a busy machine (other load; see the table's note)"


def mark_busy(ax, xs, ys, rows: pd.DataFrame) -> None:
    """A red ring around each point (or bar top) whose repeats include one measured on a busy machine
    (summary column ``busy``), labelled once per panel."""
    if "busy" not in rows:
        return
    flagged = [(x, y) for x, y, busy in zip(xs, ys, rows["busy"].fillna(0)) if busy]
    if not flagged:
        return
    labelled = BUSY_LABEL in ax.get_legend_handles_labels()[1]
    ax.scatter(*zip(*flagged), s=180, facecolors="none", edgecolors="red", linewidths=1.5, zorder=5,
               label=None if labelled else BUSY_LABEL)


def _series_label(row: pd.Series, varying: list[str]) -> str:
    return " ".join([row["framework"]] + [f"{k}={row[k]}" for k in varying if k != "framework"])


def plot(summary: pd.DataFrame, path: Path) -> Path:
    """Throughput vs world size per series with the ideal-scaling line, an efficiency panel and an MFU
    panel (flagged above 100%), one row of panels per workload. Error bars: :data:`ERROR_BARS`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = summary[summary["throughput_median"].notna()] if len(summary) else summary
    if measured.empty:
        return no_data_figure(path, "Rosetta: training throughput and scaling efficiency", nothing_measured(summary))
    workloads = sorted(measured["workload"].unique())
    fig, axes = plt.subplots(len(workloads), 3, figsize=(17, 4.2 * len(workloads)), squeeze=False)
    for (ax_tp, ax_eff, ax_mfu), workload in zip(axes, workloads):
        data = measured[measured["workload"] == workload]
        # label series by what differs between them within this panel only
        varying = [k for k in ["framework", "size", "strategy", "storage", *NUMERICS, "batch_per_worker", "device"]
                   if data[k].nunique() > 1]
        unit = data["sample_unit"].iloc[0] if len(data) else "samples"
        for (_, series) in data.groupby([k for k in SERIES_KEYS if k != "sweep_id"], dropna=False):
            series = series.sort_values("world_size")
            label = _series_label(series.iloc[0], varying)
            x = series["world_size"].astype(int)
            y = series["throughput_median"]
            err = error_bars(y, series)
            line = ax_tp.errorbar(x, y, yerr=err, marker="o", capsize=4, label=label)
            base = series.iloc[0]
            ideal = base["throughput_median"] / base["world_size"] * x
            ax_tp.plot(x, ideal, linestyle="--", color=line[0].get_color(), alpha=0.5,
                       label=f"{label} (ideal)")
            ax_eff.plot(x, series["efficiency"] * 100, marker="o", label=label, color=line[0].get_color())
            if "mfu" in series and series["mfu"].notna().any():
                ax_mfu.plot(x, series["mfu"] * 100, marker="o", label=label, color=line[0].get_color())
            mark_busy(ax_tp, x, y, series)
        ax_tp.set_title(f"{workload}: throughput vs workers")
        ax_tp.set_xlabel("workers (world size)")
        ax_tp.set_ylabel(f"{unit}/s (median over repeats)")
        ax_tp.set_ylim(bottom=0)
        ax_eff.axhline(100, color="grey", linestyle="--", linewidth=1)
        ax_eff.set_title(f"{workload}: scaling efficiency")
        ax_eff.set_xlabel("workers (world size)")
        ax_eff.set_ylabel("efficiency (% of linear from the baseline in the title)")
        ax_eff.set_ylim(0, 120)
        plot_mfu_axes(ax_mfu, workload, data)
        for ax in (ax_tp, ax_eff, ax_mfu):
            ax.grid(alpha=0.3)
            ticks = sorted(data["world_size"].astype(int).unique())
            if ticks:
                ax.set_xticks(ticks)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    fig.suptitle("Rosetta: training throughput (median over repeats; error bars: " + ERROR_BARS + ") "
                 "and scaling efficiency" + baseline_note(measured), fontsize=10)
    return save_figure(fig, path)


def plot_mfu_axes(ax, workload: str, data: pd.DataFrame) -> None:
    """The MFU panel's frame: 100% drawn, an MFU above it flagged in the panel (a peak or FLOP count is wrong)."""
    mfu = data["mfu"].astype(float) if "mfu" in data else pd.Series(dtype=float)
    ax.set_title(f"{workload}: model FLOPs utilization")
    ax.set_xlabel("workers (world size)")
    ax.set_ylabel("MFU (% of the devices' dense peak)")
    ax.set_ylim(bottom=0)
    if mfu.notna().any() and mfu.max() > 1.0:
        ax.axhline(100, color="red", linestyle="--", linewidth=1)
        ax.text(0.5, 0.95, "MFU>100%: peak table wrong?", color="red", ha="center", va="top", transform=ax.transAxes)
    elif mfu.isna().all():
        ax.text(0.5, 0.5, "no MFU: no peak for this device and precision", ha="center", va="center",
                transform=ax.transAxes)


def plot_strategies(summary: pd.DataFrame, path: Path) -> Path:
    """Strategies side by side, one row of panels per workload and world size: throughput (error bars: :data:`ERROR_BARS`),
    bytes on the wire per step (log scale, ratio to fp32 allreduce on the bars; a pipeline's
    point-to-point activations hatched on top), peak memory of every rank, time to the target
    accuracy, and the held-out accuracy curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(summary.groupby(["workload", "size", "world_size"], sort=True)) or [(("-", "-", 0), summary)]
    fig, axes = plt.subplots(len(groups), 5, figsize=(25, 4.4 * len(groups)), squeeze=False)
    for (ax_tp, ax_bytes, ax_mem, ax_tta, ax_curve), ((workload, size, world), data) in zip(axes, groups):
        # (device is left out: a skipped run reports only the device it asked for)
        varying = [k for k in ["framework", "batch_per_worker", *NUMERICS] if data[k].nunique() > 1]
        labels = [" ".join([r["strategy"]] + [f"{k}={r[k]}" for k in varying]) for _, r in data.iterrows()]
        x = list(range(len(data)))
        colors = [f"C{i % 10}" for i in x]
        _throughput_panel(ax_tp, data, x, colors)
        ax_tp.set_title(f"{workload}/{size}, {world} workers: throughput")
        _bytes_panel(ax_bytes, data, x, colors)
        plot_rank_peaks(ax_mem, data, x, colors)
        _time_to_target_panel(ax_tta, data, x, colors)
        _accuracy_panel(ax_curve, data, colors, labels)
        for ax in (ax_tp, ax_bytes, ax_mem, ax_tta):
            ax.set_xticks(x)
            ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        for ax in (ax_tp, ax_bytes, ax_mem, ax_tta, ax_curve):
            ax.grid(alpha=0.3)
        if not (data["evaluated"] > 0).any():  # a throughput-only workload: no accuracy to chart
            ax_tta.set_visible(False)
            ax_curve.set_visible(False)
    fig.suptitle("Rosetta: training strategies side by side (runs that failed, diverged or were skipped have no bar; "
                 f"throughput error bars: {ERROR_BARS})")
    return save_figure(fig, path)


def _throughput_panel(ax, data: pd.DataFrame, x: list[int], colors: list[str]) -> None:
    """Median samples/s per strategy with its error bar; the status where nothing was measured."""
    tp = data["throughput_median"].astype(float)
    ax.bar(x, tp.fillna(0), yerr=error_bars(tp, data), color=colors, capsize=4)
    for i, (_, r) in enumerate(data.iterrows()):
        if math.isnan(r["throughput_median"]):  # why there is no bar: skipped, diverged, failed
            ax.annotate(r["status"], (i, 0), ha="center", va="bottom", rotation=90, fontsize=8, color="red")
    ax.set_ylabel(f"{data['sample_unit'].iloc[0]}/s (median over repeats)")


def _bytes_panel(ax, data: pd.DataFrame, x: list[int], colors: list[str]) -> None:
    """Bytes each worker sends per step (log scale), the ratio to fp32 allreduce on the bars, a pipeline's
    point-to-point activations hatched on top."""
    sent = data["bytes_per_step"].astype(float)
    ax.bar(x, sent.fillna(0), color=colors)
    if (sent > 0).any():
        ax.set_yscale("log")
    for i, (b, ratio) in enumerate(zip(sent, data["compression_ratio"].astype(float))):
        if not math.isnan(b) and not math.isnan(ratio):
            ax.annotate(f"{ratio:.1f}x", (i, b), ha="center", va="bottom", fontsize=8)
    p2p = data["p2p_bytes_per_step"].astype(float)
    if p2p.notna().any():
        ax.bar(x, p2p.fillna(0), bottom=sent.fillna(0), color=colors, hatch="//", alpha=0.5,
               label="point-to-point (activations)")
        ax.legend(fontsize=8)
    ax.set_ylabel("bytes sent per worker per step")
    ax.set_title("on the wire (label: less than fp32 allreduce)")


def _time_to_target_panel(ax, data: pd.DataFrame, x: list[int], colors: list[str]) -> None:
    """Training seconds to the target accuracy (median over repeats), the steps it took on the bars."""
    tta = data["time_to_target_s"].astype(float)
    ax.bar(x, tta.fillna(0), color=colors)
    for i, (_, r) in enumerate(data.iterrows()):
        if r["evaluated"] and not r["reached"]:
            ax.annotate("not reached", (i, 0), ha="center", va="bottom", rotation=90, fontsize=8, color="red")
        elif r["reached"]:
            ax.annotate(f"{r['steps_to_target']:.0f} steps", (i, r["time_to_target_s"]), ha="center",
                        va="bottom", fontsize=8)
    target = data["target_accuracy"].dropna()
    ax.set_ylabel("training seconds (median over repeats)")
    ax.set_title(f"time to {f'{target.iloc[0]:.0%} held-out accuracy' if len(target) else 'target'}")
    if tta.isna().all():  # no axis of seconds around nothing (it would run from -0.04 to 0.04 s)
        ax.set_yticks([])
        ax.set_ylabel("")
        ax.text(0.5, 0.5, "not reached by any run", ha="center", va="center", color="red", transform=ax.transAxes)


def _accuracy_panel(ax, data: pd.DataFrame, colors: list[str], labels: list[str]) -> None:
    """The held-out accuracy curves, one line per repeat, the target dashed."""
    for i, (_, r) in enumerate(data.iterrows()):
        for k, curve in enumerate(r["accuracy_curves"]):
            ax.plot([p[0] for p in curve], [p[1] for p in curve], color=colors[i],
                    alpha=1.0 if k == 0 else 0.35, label=labels[i] if k == 0 else None)
    target = data["target_accuracy"].dropna()
    if len(target):
        ax.axhline(target.iloc[0], color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out accuracy")
    ax.set_title("accuracy curves (one line per repeat)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def plot_rank_peaks(ax, data: pd.DataFrame, x: list[int], colors: list[str]) -> None:
    """The largest rank's peak memory as a bar (median over repeats), every rank of every repeat as a dot."""
    ax.bar(x, data["peak_rss_mb"].astype(float).fillna(0), color=colors, alpha=0.6)
    for i, repeats in zip(x, data["rank_peaks_mb"]):
        for peaks in repeats:
            ax.scatter([i] * len(peaks), peaks, color="black", s=10, zorder=3)
    ax.set_ylabel("peak resident memory (MiB)")
    ax.set_title("peak memory: largest rank (bar), every rank (dots)")


# Telemetry columns charted, with their axis labels; GPU ones appear only where a GPU reported.
TELEMETRY_PANELS = {
    "cpu_util_pct": "CPU use per rank (% of one core)",
    "rss_max_mb": "largest resident memory per rank (MiB)",
    "gpu_util_pct": "GPU utilization (%)",
    "gpu_mem_max_mb": "GPU memory used (MiB)",
    "gpu_power_w": "GPU power (W)",
}


def plot_telemetry(table: pd.DataFrame, path: Path) -> Path | None:
    """Bars of each measured configuration's telemetry (median over repeats), one panel per
    quantity that any run reported; None if no run carried telemetry."""
    ok = table[(table["status"] == Status.OK.value) & table["telemetry_samples"].fillna(0).gt(0)]
    panels = [c for c in TELEMETRY_PANELS if ok[c].notna().any()] if len(ok) else []
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in CONFIG_KEYS if k not in ("sweep_id", "sample_unit") and ok[k].nunique(dropna=False) > 1]
    keys = keys or ["workload"]
    medians = ok.groupby(keys, dropna=False)[panels].median().reset_index()
    labels = [" ".join(f"{k}={row[k]}" for k in keys) for _, row in medians.iterrows()]  # "procs_per_node=2", not "2"
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8, 1.2 * len(labels) + 3), 2.6 * len(panels) + 1),
                             squeeze=False, sharex=True)
    for ax, column in zip(axes[:, 0], panels):
        ax.bar(range(len(labels)), medians[column].astype(float), color="tab:blue")
        ax.set_title(TELEMETRY_PANELS[column], fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    bottom = axes[-1, 0]
    bottom.set_xticks(range(len(labels)))
    bottom.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    bottom.set_xlabel("configuration (" + ", ".join(keys) + ")")
    fig.suptitle("Telemetry over the measured window (median over repeats), sampled off the training process")
    return save_figure(fig, path)


def plot_bars(summary: pd.DataFrame, path: Path, by: str = "framework") -> Path:
    """The classic bar chart: samples/s per ``by`` value (framework, strategy or storage) at each
    world size, one panel per workload; error bars: :data:`ERROR_BARS`; bars are labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = summary[summary["throughput_median"].notna()] if len(summary) else summary
    if measured.empty:
        return no_data_figure(path, f"Training throughput per {by}", nothing_measured(summary))
    workloads = sorted(measured["workload"].unique())
    fig, axes = plt.subplots(1, len(workloads), figsize=(max(8.5, 6.5 * len(workloads)), 4.8), squeeze=False)
    colors: dict[str, str] = {}  # one colour per bar label in every panel (a framework keeps its colour)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, workload in zip(axes[0], workloads):
        data = measured[measured["workload"] == workload]
        # one bar group per world size; within it one bar per value of `by` (other axes folded in)
        others = [k for k in ["framework", "strategy", "storage", "size", "batch_per_worker"]
                  if k != by and data[k].nunique() > 1]
        data = data.assign(_bar=data[[by] + others].astype(str).agg(" ".join, axis=1))
        bars = list(dict.fromkeys(data.sort_values([by] + others)["_bar"]))
        worlds = sorted(data["world_size"].astype(int).unique())
        width = 0.8 / max(len(bars), 1)
        for i, bar in enumerate(bars):
            rows = data[data["_bar"] == bar].set_index(data[data["_bar"] == bar]["world_size"].astype(int))
            xs = [w for w in range(len(worlds)) if worlds[w] in rows.index]
            ys = [rows.loc[worlds[w], "throughput_median"] for w in xs]
            low, high = error_bars(pd.Series(ys), rows.loc[[worlds[w] for w in xs]].reset_index(drop=True))
            pos = [x - 0.4 + width * (i + 0.5) for x in xs]
            color = colors.setdefault(bar, cycle[len(colors) % len(cycle)])
            ax.bar(pos, ys, width * 0.95, yerr=[low, high], capsize=3, label=bar, color=color)
            mark_busy(ax, pos, ys, rows.loc[[worlds[w] for w in xs]].reset_index(drop=True))
            for p, y in zip(pos, ys):
                # the value inside the bar's foot, clear of the error bar
                ax.annotate(f"{y:,.0f}" if y >= 100 else f"{y:.3g}", (p, 0),  # 22,600, never 2.26e+04 textcoords="offset points", xytext=(0, 3), ha="center",
                            va="bottom", fontsize=7, color="white", fontweight="bold")
        ax.set_xticks(range(len(worlds)), [str(w) for w in worlds])
        ax.set_xlabel("workers (world size)")
        unit = data["sample_unit"].iloc[0] if len(data) else "samples"
        ax.set_ylabel(f"{unit}/s (median over repeats)")
        ax.set_title(f"{workload}: {unit}/s per {by} and worker count")
        ax.grid(axis="y", alpha=0.3)
        if bars:
            ax.legend(fontsize=8, title=" ".join([by] + others))
    fig.suptitle(f"Training throughput per {by} (error bars: {ERROR_BARS})", fontsize=10)
    return save_figure(fig, path)


def plot_step_times(table: pd.DataFrame, path: Path) -> Path:
    """Distribution of the raw per-step times (ms) of every configuration, repeats pooled: the
    spread behind the medians (box: quartiles, whiskers: 5th-95th percentile)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = table[(table["status"] == Status.OK.value) & table["step_times_s"].notna()]
    if ok.empty:
        counts = table["status"].value_counts()
        return no_data_figure(path, "Per-step times", "nothing measured: no run of this sweep succeeded ("
                              + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")")
    groups = {}
    for _, row in ok.sort_values(["workload", "framework", "strategy", "world_size"]).iterrows():
        label = (f"{row['workload']}/{row['size']} {row['framework']} {row['strategy']} "
                 f"{row['nodes']}x{row['procs_per_node']} b{row['batch_per_worker']}")
        groups.setdefault(label, []).extend(t * 1000 for t in json.loads(row["step_times_s"]))
    fig, ax = plt.subplots(figsize=(10, 0.5 * max(len(groups), 2) + 1.5))
    if groups:
        ax.boxplot(list(groups.values()), vert=False, whis=(5, 95), showfliers=False)
        ax.set_yticks(range(1, len(groups) + 1), list(groups), fontsize=8)
    ax.set_xlabel("time per training step (ms), slowest rank")
    ax.set_title("Per-step times, repeats pooled (box: quartiles; whiskers: 5th-95th percentile)")
    ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, path)
