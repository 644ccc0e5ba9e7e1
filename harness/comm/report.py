"""Report of the comm table: a rich table per backend and world size, a bandwidth chart."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from harness.base.escaping import terminal as escape

from harness.reports.charts import save_figure

# Sizes up to this many bytes are latency-bound: the report gives their time as the latency.
LATENCY_MAX_BYTES = 1024


def human_bytes(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} B"


def latest_sweep(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the most recent comm sweep."""
    if table.empty:
        return table
    last = table.sort_values("timestamp")["sweep_id"].iloc[-1]
    return table[table["sweep_id"] == last]


def print_tables(table: pd.DataFrame, console) -> None:
    """Per backend, world size and collective: per size, time (us), algbw and busbw (GB/s), then the latency."""
    from rich.table import Table

    ok = table[table["status"] == "ok"]
    for (backend, world, device, collective), group in ok.groupby(
            ["backend", "world_size", "device", "collective"], sort=True):
        out = Table(title=f"{collective}, {backend} on {device}, {world} ranks")
        for col in ("size", "iters", "time us (p50)", "time us (min)", "algbw GB/s", "busbw GB/s"):
            out.add_column(col, justify="right")
        for _, r in group.sort_values("bytes").iterrows():
            out.add_row(human_bytes(int(r["bytes"])), str(r["iters"]), f"{r['time_p50_s'] * 1e6:.1f}",
                        f"{r['time_min_s'] * 1e6:.1f}", f"{r['algbw_GBps']:.4f}", f"{r['busbw_GBps']:.4f}")
        console.print(out)
        small = group[group["bytes"] <= LATENCY_MAX_BYTES]
        if not small.empty:
            console.print(f"{collective} latency (median time at sizes <= 1 KiB): "
                          f"{small['time_p50_s'].median() * 1e6:.1f} us; peak busbw "
                          f"{group['busbw_GBps'].max():.3f} GB/s")
    for _, r in table[table["status"] != "ok"].iterrows():
        console.print(f"{r['backend']} x{r['world_size']}: [yellow]{r['status']}[/yellow]: {escape(r['reason'] or '')}",
                      highlight=False)


def plot(table: pd.DataFrame, path: Path) -> Path:
    """busbw (GB/s) and time (us) against message size, one line per backend, world size and collective."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = table[table["status"] == "ok"]
    fig, (bw_ax, t_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    for (backend, world, collective), g in ok.groupby(["backend", "world_size", "collective"], sort=True):
        g = g.sort_values("bytes")
        label = f"{backend} x{world} {collective}"
        bw_ax.plot(g["bytes"], g["busbw_GBps"], marker="o", ms=3, label=label)
        t_ax.plot(g["bytes"], g["time_p50_s"] * 1e6, marker="o", ms=3, label=label)
    for ax, ylabel in ((bw_ax, "bus bandwidth (GB/s)"), (t_ax, "time (us, slowest rank, median)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    bw_ax.legend(fontsize=7)
    fig.suptitle("Collective microbenchmark (rosetta comm)")
    return save_figure(fig, path)
