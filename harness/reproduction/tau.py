"""SparkNet's curve (Moritz et al. 2016, their Figure 3's shape): the speed-up of parameter averaging every
tau local steps over allreduce every step, in wall-clock time to the target held-out accuracy, against tau,
one curve per link (the run's ``network`` cap). Allreduce is the curve's tau = 1: it averages the gradients
every step, as local SGD with tau = 1 averages the weights every step.

Read from a results table's rows (their ``strategy_options`` say each local SGD run's tau), so several
sweeps (one per tau, one per link) make one chart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from harness.reports import aggregate

STRATEGIES = ("allreduce", "local_sgd")
COLUMNS = ["network", "world_size", "tau", "runs", "reached", "time_to_target_s", "steps_to_target",
           "throughput", "bytes_per_step", "speedup"]


def tau_of(row: pd.Series) -> int:
    """1 for allreduce (every step), else the run's tau."""
    if row["strategy"] == "allreduce":
        return 1
    return int(json.loads(row["strategy_options"] or "{}").get("tau", 0))


def points(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (network, world size, tau) of the ok allreduce and local SGD runs of world size >= 2:
    medians over repeats of the time to target (s, over the repeats that reached it), steps to it,
    throughput (samples/s) and bytes per step, and ``speedup``: allreduce's median time to target on the same
    link and world size over this one's (NaN where either never reached it)."""
    ok = aggregate.latest_attempts(table)
    ok = ok[(ok["status"] == "ok") & ok["strategy"].isin(STRATEGIES) & (ok["world_size"] >= 2)].copy()
    if ok.empty:
        return pd.DataFrame(columns=COLUMNS)
    ok["tau"] = ok.apply(tau_of, axis=1)
    out = []
    for (network, world, tau), rows in ok.groupby(["network", "world_size", "tau"], sort=True):
        reached = rows[rows["time_to_target_s"].notna()]
        out.append({"network": network, "world_size": int(world), "tau": int(tau), "runs": len(rows),
                    "reached": len(reached), "time_to_target_s": _median(reached["time_to_target_s"]),
                    "steps_to_target": _median(reached["steps_to_target"]),
                    "throughput": _median(rows["throughput"]), "bytes_per_step": _median(rows["bytes_per_step"])})
    frame = pd.DataFrame(out, columns=COLUMNS[:-1])
    base = frame[frame["tau"] == 1].set_index(["network", "world_size"])["time_to_target_s"]
    frame["speedup"] = [base.get((r.network, r.world_size), math.nan) / r.time_to_target_s
                        for r in frame.itertuples()]
    return frame


def _median(values: pd.Series) -> float:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.median()) if len(values) else math.nan


def sweeps_tau(frame: pd.DataFrame) -> bool:
    """Whether ``frame`` holds a curve: allreduce and at least one tau on one link."""
    return any(data["tau"].nunique() >= 2 and (data["tau"] == 1).any() for _, data in frame.groupby("network"))


def lines(frame: pd.DataFrame) -> list[str]:
    """Each link's curve in words: speed-up in time to target, and steps to target, at each tau."""
    out = []
    for (network, world), data in frame.groupby(["network", "world_size"], sort=True):
        points_text = ", ".join(
            f"tau {r.tau}: " + (f"{r.speedup:.2f}x ({r.time_to_target_s:.2f} s, {r.steps_to_target:.0f} steps)"
                                if r.reached else "never reached the target")
            for r in data.sort_values("tau").itertuples())
        out.append(f"Speed-up in time to target over allreduce (tau 1) on a {network} link, {world} workers: "
                   f"{points_text}.")
    return out


def plot(frame: pd.DataFrame, path: Path) -> Path:
    """Left: speed-up in time to target against tau (log 2), one line per link, 1 = allreduce. Right: the
    time to target itself and the steps it took, which grow with tau (averaging less often costs accuracy)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.reports import charts

    fig, (ax_speed, ax_time) = plt.subplots(1, 2, figsize=(12, 4.6))
    ax_steps = ax_time.twinx()
    for (network, world), data in frame.groupby(["network", "world_size"], sort=True):
        data = data.sort_values("tau")
        label = f"{network} link, {world} workers"
        line = ax_speed.plot(data["tau"], data["speedup"], marker="s", linewidth=2, label=label)[0]
        ax_time.plot(data["tau"], data["time_to_target_s"], marker="s", color=line.get_color(),
                     label=f"{label}: seconds")
        ax_steps.plot(data["tau"], data["steps_to_target"], linestyle=":", marker="x", color=line.get_color(),
                      label=f"{label}: steps")
    ax_steps.set_ylabel("steps to target (dotted)")
    ax_speed.axhline(1, color="grey", linewidth=1)
    ax_speed.set_ylabel("speed-up in time to target over allreduce")
    ax_speed.set_title("SparkNet's shape: averaging every tau steps vs allreduce (tau 1)", fontsize=9)
    ax_time.set_ylabel("wall-clock seconds to target (solid)")
    ax_time.set_title("time and steps to the target accuracy", fontsize=9)
    for ax in (ax_speed, ax_time):
        charts.count_axis(ax, frame["tau"], "tau (local steps between averagings; 1 = allreduce every step)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Speed-up against tau (medians over repeats; runs that never reached the target have no point)",
                 fontsize=10)
    return charts.save_figure(fig, path)
