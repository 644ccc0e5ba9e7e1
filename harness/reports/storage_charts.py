"""Charts of the storage axis: throughput and data stall per storage backend, in the backends' declared
order and with their declared labels (harness.contract.axes.Storage), which the other storage charts
(emulated accelerators, benchmarks' partition loads) use too."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.contract.axes import Status, Storage, values
from harness.reports.charts import save_figure


def storage_order(name: str) -> int:
    """Where a storage backend comes on a chart: its place in the declaration (harness.contract.axes.Storage);
    a name no longer declared (an old table's) last."""
    return list(Storage).index(Storage(name)) if name in values(Storage) else len(Storage)


def storage_label(name: str) -> str:
    """A storage backend's name on a chart (its declared label: cold and warm caches told apart)."""
    return Storage(name).label if name in values(Storage) else name


def plot_storage(table: pd.DataFrame, path: Path) -> Path | None:
    """Throughput (bars) and data-stall fraction (line, right axis) per storage backend, median over
    repeats, in the style of the published NFS-vs-cache charts; None unless a sweep read real data."""
    ok = table[(table["status"] == Status.OK.value)]
    if ok.empty or not (ok["storage"] != "synthetic").any():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    medians = ok.groupby("storage")[["throughput", "data_stall_frac", "loader_throughput"]].median()
    names = sorted(medians.index, key=storage_order)
    medians = medians.loc[names]
    labels = [storage_label(s) for s in names]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names) + 2), 4.5))
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], medians["throughput"].astype(float), width=0.4, color="tab:blue",
           label="training throughput")
    ax.bar([i + 0.2 for i in x], medians["loader_throughput"].astype(float).fillna(0), width=0.4,
           color="tab:gray", alpha=0.6, label="input pipeline alone")
    ax.set_ylabel(f"{ok['sample_unit'].iloc[0]}/s (median over repeats)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels)
    stall = ax.twinx()
    stall.plot(list(x), medians["data_stall_frac"].astype(float).fillna(0) * 100, "o-", color="tab:red",
               label="data stall")
    stall.set_ylabel("data stall (% of step time waiting for input)")
    stall.set_ylim(0, 100)
    handles = ax.get_legend_handles_labels()[0] + stall.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], loc="upper right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    title = " ".join(str(ok[k].iloc[0]) for k in ("workload", "size"))
    ax.set_title(f"Throughput and data stall per storage backend ({title})")
    return save_figure(fig, path)
