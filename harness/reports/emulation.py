"""Emulated accelerators over a sweep (MLPerf Storage's headline): per storage backend, the largest
number of emulated accelerators that kept accelerator utilization at or above the threshold, and a
chart of AU and throughput against the number of emulated accelerators, one line per backend. Each
framework's input pipeline feeds its emulated accelerators (torch_ddp's DataLoader, tf_mwms's tf.data,
chainer's iterator; the Horovod frameworks' are torch_ddp's and tf_mwms's, with Horovod's barrier), so a
sweep over frameworks is summarized per framework too. Only MLPerf Storage's emulated accelerators (a sleep and a
barrier): an emulated cluster's (real gradients, harness/machines/emulated_cluster.py) spend the AU it loses in
their exchange, which says nothing about the storage."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.contract.axes import Exchange, Status
from harness.reports.charts import save_figure
from harness.reports.storage_charts import storage_label

KEYS = ["framework", "storage", "accelerator", "world_size"]


def per_size(table: pd.DataFrame) -> pd.DataFrame:
    """Emulated runs, median over repeats per framework, backend, accelerator and number of accelerators (world size);
    ``passed``: every repeat kept AU at or above its threshold (a repeat that failed counts as not)."""
    runs = table[table["device"] == "emulated"] if "device" in table else table.iloc[0:0]
    runs = runs[runs["accelerator"].notna()]
    if "exchange" in runs:  # an emulated cluster's AU is lost to its exchange, not to its storage: not this headline
        runs = runs[runs["exchange"].fillna(Exchange.BARRIER.value) == Exchange.BARRIER.value]
    if runs.empty:
        return pd.DataFrame(columns=[*KEYS, "au", "au_threshold", "throughput", "read_mb_s", "data_stall_frac",
                                     "loader_cpu_bound", "passed", "repeats"])
    runs = runs.assign(passed_one=(runs["status"] == Status.OK.value) & runs["au_ok"].fillna(False).astype(bool))
    grouped = runs.groupby(KEYS, dropna=False)
    out = grouped[["au", "au_threshold", "throughput", "read_mb_s", "data_stall_frac"]].median()
    out["loader_cpu_bound"] = grouped["loader_cpu_bound"].agg(lambda s: bool(s.fillna(False).astype(bool).any()))
    out["passed"] = grouped["passed_one"].all()
    out["repeats"] = grouped.size()
    return out.reset_index()


def max_accelerators(table: pd.DataFrame) -> pd.DataFrame:
    """Per framework, backend and accelerator: the largest number of emulated accelerators whose every repeat kept
    AU >= threshold (0: none did), its median throughput, and whether the first size that failed did so
    with the loader CPU-bound (then this machine's CPU, not the storage, set the limit)."""
    sizes = per_size(table)
    rows = []
    for (framework, storage, accelerator), group in sizes.groupby(KEYS[:-1], dropna=False):
        group = group.sort_values("world_size")
        passed = group[group["passed"]]
        failed = group[~group["passed"] & (group["world_size"] > (passed["world_size"].max() if len(passed) else 0))]
        best = passed.iloc[-1] if len(passed) else None
        rows.append({"framework": framework, "storage": storage, "accelerator": accelerator,
                     "max_accelerators": int(best["world_size"]) if best is not None else 0,
                     "throughput_at_max": float(best["throughput"]) if best is not None else None,
                     "au_at_max": float(best["au"]) if best is not None else None,
                     "limit_cpu_bound": bool(failed.iloc[0]["loader_cpu_bound"]) if len(failed) else None,
                     "sizes_tried": ",".join(str(int(w)) for w in group["world_size"])})
    return pd.DataFrame(rows)


def plot(table: pd.DataFrame, path: Path) -> Path | None:
    """AU (with the threshold) and throughput against emulated accelerators, a line per backend (and
    framework, where the sweep has several); None without emulated runs."""
    sizes = per_size(table)
    if sizes.empty:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (au_ax, tput_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    several = sizes["framework"].nunique(dropna=False) > 1
    for (framework, storage, accelerator), group in sizes.groupby(KEYS[:-1], dropna=False):
        group = group.sort_values("world_size")
        label = (f"{framework}: " if several else "") + f"{storage_label(storage)}, {accelerator}"
        au_ax.plot(group["world_size"], group["au"].astype(float) * 100, "o-", label=label)
        tput_ax.plot(group["world_size"], group["throughput"].astype(float), "o-", label=label)
    threshold = float(sizes["au_threshold"].max())
    au_ax.axhline(threshold * 100, color="black", linestyle="--", linewidth=1, label=f"threshold {threshold:.0%}")
    au_ax.set_ylabel("accelerator utilization AU (%), median over repeats")
    au_ax.set_ylim(0, 105)
    tput_ax.set_ylabel("samples/s (median over repeats)")
    for ax in (au_ax, tput_ax):
        ax.set_xticks(sorted(int(w) for w in sizes["world_size"].unique()))
        ax.set_xlabel("emulated accelerators (ranks)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Emulated accelerators per storage backend (real loader, profiled compute slept)")
    return save_figure(fig, path)
