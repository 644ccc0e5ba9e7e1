"""Summaries of the results table: a terminal table (rich) and a chart (matplotlib)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from harness import metrics
from harness.axes import Status

# A configuration less its world size: the group within which scaling efficiency is computed.
SERIES_KEYS = ["sweep_id", "scenario", "framework", "workload", "size", "strategy", "storage", "launcher",
               "network", "batch_per_worker", "device", "sample_unit"]
CONFIG_KEYS = SERIES_KEYS + ["nodes", "procs_per_node", "world_size"]


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: repeats, median throughput (samples/s) with a 95% CI of the
    mean, pooled per-step p50/p90 (s), and scaling efficiency against the smallest world size
    measured in the same sweep and series."""
    if table.empty:
        return pd.DataFrame(columns=CONFIG_KEYS)
    table = table.copy()
    table["device"] = table["device"].fillna(table["device_requested"])
    out = []
    for keys, group in table.groupby(CONFIG_KEYS, dropna=False, sort=True):
        ok = group[group["status"] == Status.OK.value]
        tps = ok["throughput"].astype(float).tolist()
        steps = [t for s in ok["step_times_s"].dropna() for t in json.loads(s)]
        low, high = metrics.mean_ci95(tps)
        not_ok = group[group["status"] != Status.OK.value]
        out.append({
            **dict(zip(CONFIG_KEYS, keys)),
            "runs": len(group),
            "ok": len(ok),
            "throughput_median": float(pd.Series(tps).median()) if tps else math.nan,
            "ci95_low": low,
            "ci95_high": high,
            "step_p50_s": metrics.percentile(steps, 50) if steps else math.nan,
            "step_p90_s": metrics.percentile(steps, 90) if steps else math.nan,
            "weights_consistent": bool(ok["weights_consistent"].fillna(False).all()) if len(ok) else None,
            "status": ", ".join(sorted(set(group["status"]))),
            "reason": not_ok["reason"].dropna().iloc[0] if not_ok["reason"].notna().any() else None,
        })
    summary = pd.DataFrame(out)
    summary["efficiency"] = math.nan
    for _, series in summary.groupby(SERIES_KEYS, dropna=False):
        measured = series[series["throughput_median"].notna()]
        if measured.empty:
            continue
        base = measured.loc[measured["world_size"].idxmin()]
        for idx, row in measured.iterrows():
            summary.loc[idx, "efficiency"] = metrics.scaling_efficiency(
                row["throughput_median"], int(row["world_size"]), base["throughput_median"],
                int(base["world_size"]))
    return summary


def latest_sweep(table: pd.DataFrame) -> str | None:
    return None if table.empty else str(table.sort_values("timestamp")["sweep_id"].iloc[-1])


def print_table(summary: pd.DataFrame, console=None) -> None:
    """The summary as a rich table (columns with one value across it folded into the title),
    then the configurations that were not measured, with their reasons."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    cells = {
        "framework": lambda r: r["framework"],
        "workload": lambda r: f"{r['workload']}/{r['size']}",
        "world": lambda r: f"{r['nodes']}x{r['procs_per_node']}",
        "batch/worker": lambda r: str(r["batch_per_worker"]),
        "strategy": lambda r: r["strategy"],
        "storage": lambda r: r["storage"],
        "launcher": lambda r: str(r["launcher"]),
        "network": lambda r: str(r["network"]),
        "device": lambda r: str(r["device"]),
        "ok/runs": lambda r: f"{r['ok']}/{r['runs']}",
        "samples/s": lambda r: (f"{r['throughput_median']:.1f}" if not math.isnan(r["throughput_median"])
                                else f"[red]{r['status']}[/red]"),
        "unit": lambda r: r["sample_unit"],
        "95% CI": _ci,
        "step p50 ms": lambda r: _ms(r["step_p50_s"]),
        "step p90 ms": lambda r: _ms(r["step_p90_s"]),
        "efficiency": lambda r: f"{r['efficiency']:.0%}" if not math.isnan(r["efficiency"]) else "-",
        "weights": lambda r: {True: "same", False: "[red]DIFFER[/red]", None: "-"}[r["weights_consistent"]],
    }
    rendered = {name: [fn(r) for _, r in summary.iterrows()] for name, fn in cells.items()}
    foldable = ("framework", "batch/worker", "strategy", "storage", "launcher", "network", "device")
    constant = [n for n in foldable if len(summary) > 1 and len(set(rendered[n])) == 1]
    title = "samples/s: median over repeats of global samples / slowest rank's measured time"
    if constant:
        title += "\n" + ", ".join(f"{n} = {rendered[n][0]}" for n in constant)
    table = Table(title=title)
    columns = [n for n in cells if n not in constant]
    for name in columns:
        table.add_column(name, justify="left" if name in ("framework", "workload", "strategy", "storage",
                                                          "device", "unit", "weights") else "right")
    for i in range(len(summary)):
        table.add_row(*(rendered[name][i] for name in columns))
    console.print(table)
    problems = summary[summary["reason"].notna()]
    for _, r in problems.iterrows():
        console.print(f"[yellow]{r['framework']} {r['workload']}/{r['size']} world {r['world_size']}: "
                      f"{r['status']}[/yellow] - {escape(r['reason'])}", markup=True, highlight=False)


def _ci(r: pd.Series) -> str:
    if math.isnan(r["ci95_low"]):
        return "-"
    return f"{r['ci95_low']:.1f}-{r['ci95_high']:.1f}"


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f}"


def _series_label(row: pd.Series, varying: list[str]) -> str:
    return " ".join([row["framework"]] + [f"{k}={row[k]}" for k in varying if k != "framework"])


def plot(summary: pd.DataFrame, path: Path) -> Path:
    """Throughput vs world size per series with the ideal-scaling line, and an efficiency panel,
    one row of panels per workload. Error bars are the 95% CI over repeats."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = summary[summary["throughput_median"].notna()]
    workloads = sorted(measured["workload"].unique()) or ["(nothing measured)"]
    fig, axes = plt.subplots(len(workloads), 2, figsize=(12, 4.2 * len(workloads)), squeeze=False)
    for (ax_tp, ax_eff), workload in zip(axes, workloads):
        data = measured[measured["workload"] == workload]
        # label series by what differs between them within this panel only
        varying = [k for k in ["framework", "size", "strategy", "storage", "launcher", "network",
                               "batch_per_worker", "device"]
                   if data[k].nunique() > 1]
        unit = data["sample_unit"].iloc[0] if len(data) else "samples"
        for (_, series) in data.groupby([k for k in SERIES_KEYS if k != "sweep_id"], dropna=False):
            series = series.sort_values("world_size")
            label = _series_label(series.iloc[0], varying)
            x = series["world_size"].astype(int)
            y = series["throughput_median"]
            err = [(y - series["ci95_low"]).fillna(0).clip(lower=0), (series["ci95_high"] - y).fillna(0).clip(lower=0)]
            line = ax_tp.errorbar(x, y, yerr=err, marker="o", capsize=4, label=label)
            base = series.iloc[0]
            ideal = base["throughput_median"] / base["world_size"] * x
            ax_tp.plot(x, ideal, linestyle="--", color=line[0].get_color(), alpha=0.5,
                       label=f"{label} (ideal)")
            ax_eff.plot(x, series["efficiency"] * 100, marker="o", label=label, color=line[0].get_color())
        ax_tp.set_title(f"{workload}: throughput vs workers")
        ax_tp.set_xlabel("workers (world size)")
        ax_tp.set_ylabel(f"{unit}/s (median over repeats)")
        ax_tp.set_ylim(bottom=0)
        ax_eff.axhline(100, color="grey", linestyle="--", linewidth=1)
        ax_eff.set_title(f"{workload}: scaling efficiency")
        ax_eff.set_xlabel("workers (world size)")
        ax_eff.set_ylabel("efficiency (% of linear)")
        ax_eff.set_ylim(0, 120)
        for ax in (ax_tp, ax_eff):
            ax.grid(alpha=0.3)
            ticks = sorted(data["world_size"].astype(int).unique())
            if ticks:
                ax.set_xticks(ticks)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    fig.suptitle("Rosetta: training throughput (median over repeats; error bars: 95% CI of the mean) "
                 "and scaling efficiency")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_bars(summary: pd.DataFrame, path: Path, by: str = "framework") -> Path:
    """The classic bar chart: samples/s per ``by`` value (framework, strategy or storage) at each
    world size, one panel per workload; error bars are the 95% CI over repeats, bars are labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = summary[summary["throughput_median"].notna()]
    workloads = sorted(measured["workload"].unique()) or ["(nothing measured)"]
    fig, axes = plt.subplots(1, len(workloads), figsize=(max(8.5, 6.5 * len(workloads)), 4.8), squeeze=False)
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
            low = [max(0.0, y - rows.loc[worlds[w], "ci95_low"]) if not math.isnan(rows.loc[worlds[w], "ci95_low"])
                   else 0.0 for w, y in zip(xs, ys)]
            high = [max(0.0, rows.loc[worlds[w], "ci95_high"] - y) if not math.isnan(rows.loc[worlds[w], "ci95_high"])
                    else 0.0 for w, y in zip(xs, ys)]
            pos = [x - 0.4 + width * (i + 0.5) for x in xs]
            ax.bar(pos, ys, width * 0.95, yerr=[low, high], capsize=3, label=bar)
            for p, y in zip(pos, ys):
                # the value inside the bar's foot, clear of the error bar
                ax.annotate(f"{y:.3g}", (p, 0), textcoords="offset points", xytext=(0, 3), ha="center",
                            va="bottom", fontsize=7, color="white", fontweight="bold")
        ax.set_xticks(range(len(worlds)), [str(w) for w in worlds])
        ax.set_xlabel("workers (world size)")
        unit = data["sample_unit"].iloc[0] if len(data) else "samples"
        ax.set_ylabel(f"{unit}/s (median over repeats)")
        ax.set_title(f"{workload}: {unit}/s per {by} and worker count")
        ax.grid(axis="y", alpha=0.3)
        if bars:
            ax.legend(fontsize=8, title=" ".join([by] + others))
    fig.suptitle(f"Training throughput per {by} (error bars: 95% CI of the mean over repeats)", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_step_times(table: pd.DataFrame, path: Path) -> Path:
    """Distribution of the raw per-step times (ms) of every configuration, repeats pooled: the
    spread behind the medians (box: quartiles, whiskers: 5th-95th percentile)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = table[(table["status"] == Status.OK.value) & table["step_times_s"].notna()]
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
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
