"""The summary of a results table: one line per configuration with its statistics over repeats (a pandas
DataFrame the terminal table, the charts and the notebook all read)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from harness.base.errors import UserError
from harness.contract.axes import Status
from harness.results import metrics

# A configuration less its world size: the group within which scaling efficiency is computed.
# Dimensions a configuration may vary in besides the classic ones; shown and folded like them.
NUMERICS = ["launcher", "network", "precision", "memory_format", "compile"]
SERIES_KEYS = ["sweep_id", "scenario", "framework", "workload", "size", "strategy", "storage", *NUMERICS,
               "batch_per_worker", "device", "sample_unit"]
CONFIG_KEYS = SERIES_KEYS + ["nodes", "procs_per_node", "world_size"]
UNKNOWN = "-"  # a text dimension the table leaves empty

def latest_attempts(table: pd.DataFrame) -> pd.DataFrame:
    """Each repeat of each configuration of each sweep once: its last attempt (the others stay in the table)."""
    keys = ["sweep_id", "config_id", "repeat"]
    ordered = table.sort_values("timestamp", kind="stable")
    identified = ordered[keys].notna().all(axis=1)  # rows without their identity are each their own
    latest = ordered[identified].drop_duplicates(keys, keep="last")
    return pd.concat([latest, ordered[~identified]]).sort_index().copy()


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: repeats, median throughput (samples/s) with its spread over
    repeats (:func:`metrics.throughput_interval`: the observed range below 3 repeats, else a 95%
    interval that never goes below zero; ``interval_kind`` says which), pooled per-step p50/p90 (s), and scaling efficiency against the smallest world size
    measured in the same sweep and series. A repeat run again (``--resume``) counts once: its last attempt."""
    if table.empty:
        return pd.DataFrame(columns=CONFIG_KEYS)
    table = latest_attempts(table)
    table["device"] = table["device"].fillna(table["device_requested"])
    for key in [*CONFIG_KEYS, "status"]:  # text an older or hand-made table lacks: shown as "-", never a crash
        if key in table and str(table[key].dtype) == "string":
            table[key] = table[key].fillna(UNKNOWN)
    # config_id too: two configurations the keys do not tell apart (a seed, options) are never one line
    grouped = table.groupby([*CONFIG_KEYS, "config_id"], dropna=False, sort=True)
    out = [_configuration(keys, group) for keys, group in grouped]
    summary = pd.DataFrame(out)
    _scaling_efficiency(summary)
    return summary


def _configuration(keys: tuple, group: pd.DataFrame) -> dict:
    """One configuration's summary row from its repeats' rows (``keys``: its CONFIG_KEYS values)."""
    ok = group[group["status"] == Status.OK.value]
    tps = ok["throughput"].astype(float).tolist()
    steps = [t for s in ok["step_times_s"].dropna() for t in json.loads(s)]
    low, high, kind = metrics.throughput_interval(tps)
    not_ok = group[group["status"] != Status.OK.value]
    reached = ok[ok["steps_to_target"].notna()]
    return {
        **dict(zip([*CONFIG_KEYS, "config_id"], keys)),
        "runs": len(group),
        "ok": len(ok),
        "throughput_median": float(pd.Series(tps).median()) if tps else math.nan,
        "interval_low": low,  # samples/s
        "interval_high": high,
        "interval_kind": kind,
        "step_p50_s": metrics.percentile(steps, 50) if steps else math.nan,
        "step_p90_s": metrics.percentile(steps, 90) if steps else math.nan,
        "weights_consistent": bool(ok["weights_consistent"].fillna(False).all()) if len(ok) else None,
        "bytes_per_step": _median(ok["bytes_per_step"]),
        "compression_ratio": _median(ok["compression_ratio"]),
        # columns added within schema versions: a frame made elsewhere may lack them
        "staleness_mean": _median(ok.get("staleness_mean")),  # asynchronous strategies
        "staleness_max": _median(ok.get("staleness_max")),
        "plain_throughput": _median(ok.get("plain_throughput")),
        "p2p_bytes_per_step": _median(ok.get("p2p_bytes_per_step")),  # pipeline activations (NaN for others)
        "peak_rss_mb": _median(ok.get("peak_rss_mb")),  # the largest rank's peak, median over repeats
        "rank_peaks_mb": [json.loads(p) for p in ok.get("rank_peak_rss_mb", pd.Series(dtype=object)).dropna()],  # per repeat, per rank
        "peak_gpu_allocated_mb": _median(ok.get("peak_gpu_allocated_mb")),  # the largest rank's, median
        "peak_gpu_reserved_mb": _median(ok.get("peak_gpu_reserved_mb")),
        "achieved_tflops": _median(ok.get("achieved_tflops")),  # per device, median over repeats
        "mfu": _median(ok.get("mfu")),  # fraction of the dense peak, median over repeats
        "peak_source": _first(ok.get("peak_source")),
        "target_accuracy": _median(group["target_accuracy"]),
        "evaluated": int(ok["accuracy_curve"].notna().sum()),  # ok repeats with an accuracy curve
        "reached": len(reached),  # ok repeats that reached the target
        "steps_to_target": _median(reached["steps_to_target"]),
        "time_to_target_s": _median(reached["time_to_target_s"]),
        "final_accuracy": _median(ok["final_accuracy"]),
        "accuracy_curves": [json.loads(c) for c in ok["accuracy_curve"].dropna()],
        **busy_fields(ok),
        "status": ", ".join(sorted(set(group["status"]))),
        "reason": not_ok["reason"].dropna().iloc[0] if not_ok["reason"].notna().any() else None,
    }


def _scaling_efficiency(summary: pd.DataFrame) -> None:
    """Each measured configuration's scaling efficiency against the smallest world size of its series, and
    the baseline it was measured against (columns ``efficiency``, ``efficiency_baseline``, ``wrapper_cost``)."""
    summary["efficiency"] = math.nan
    summary["efficiency_baseline"] = None
    plain = summary["plain_throughput"].where(summary["plain_throughput"] > 0)  # 0: nothing to compare with
    summary["wrapper_cost"] = summary["throughput_median"] / plain
    for _, series in summary.groupby(SERIES_KEYS, dropna=False):
        measured = series[series["throughput_median"].notna()]
        if measured.empty:
            continue
        base = measured.loc[measured["world_size"].idxmin()]
        base_tp, label = baseline(base)
        for idx, row in measured.iterrows():
            summary.loc[idx, "efficiency"] = metrics.scaling_efficiency(
                row["throughput_median"], int(row["world_size"]), base_tp, int(base["world_size"]))
            summary.loc[idx, "efficiency_baseline"] = label


PLAIN_BASELINE = "the plain single-device loop (no DDP wrapper)"


def baseline(base: pd.Series) -> tuple[float, str]:
    """The throughput efficiency divides by, and its name: the plain single-device loop where the
    framework measured one (as the published figures define the 1-GPU base), else the distributed
    run at the smallest world size."""
    if int(base["world_size"]) == 1 and not math.isnan(base["plain_throughput"]):
        return float(base["plain_throughput"]), PLAIN_BASELINE
    return float(base["throughput_median"]), f"{base['framework']} itself at world size {int(base['world_size'])}"


def busy_fields(ok: pd.DataFrame) -> dict[str, object]:
    """How many ``ok`` repeats were measured on a busy machine (:func:`harness.results.table.is_busy`)
    and the first one's reason; the figures beside them are not this code's alone."""
    from harness.results import table as results

    busy = [row for row in ok.to_dict("records") if results.is_busy(row)]
    return {"busy": len(busy), "busy_note": results.busy_figure(busy[0]) if busy else None}


def _median(values: pd.Series | None) -> float:
    if values is None:
        return math.nan
    values = values.dropna().astype(float)
    return float(values.median()) if len(values) else math.nan


def _first(values: pd.Series | None) -> str | None:
    values = values.dropna() if values is not None else ()
    return str(values.iloc[0]) if len(values) else None


def compares_strategies(summary: pd.DataFrame) -> bool:
    """Whether a summary is about strategies or accuracy (then the report shows their columns
    and chart); a plain throughput sweep with the default strategy is reported as before."""
    if summary.empty:
        return False
    return bool(set(summary["strategy"]) - {"allreduce"}) or bool((summary["evaluated"] > 0).any())


def select_sweep(results_dir: Path, sweep: str | None) -> tuple[pd.DataFrame, str]:
    """The rows of ``sweep`` (default: the latest; ``all``: every sweep) and the sweep's name."""
    from harness.results import table as results

    order = results.sweep_order(results.RESULTS, Path(results_dir))  # chosen from two columns, then read
    if order.empty:
        raise UserError(results.nothing_yet(Path(results_dir)))
    sweep = sweep or latest_sweep(order)
    if sweep != "all" and sweep not in set(order["sweep_id"]):
        raise UserError(f"--sweep: no sweep {sweep!r} in {results_dir}")
    table = results.load(Path(results_dir), sweeps=None if sweep == "all" else [sweep])
    check_reportable(table, str(Path(results_dir) / results.PARQUET))
    return table, sweep


# What a line of the summary is made of: a row without one of them (a table written by hand, a damaged one)
# cannot be placed on any line.
REQUIRED = ("framework", "workload", "nodes", "procs_per_node", "world_size", "batch_per_worker")


def check_reportable(table: pd.DataFrame, where: str) -> None:
    """Every row has the dimensions a summary line needs (one line naming the first that lacks one)."""
    for key in REQUIRED:
        empty = table[key].isna() if key in table else pd.Series(True, index=table.index)
        if empty.any():
            raise UserError(f"{where}: row {empty.idxmax()} has no {key}; a report places each row by "
                            f"{', '.join(REQUIRED)}")


def latest_sweep(table: pd.DataFrame) -> str | None:
    return None if table.empty else str(table.sort_values("timestamp")["sweep_id"].iloc[-1])
