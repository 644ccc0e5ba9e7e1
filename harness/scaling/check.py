"""The scaling model checked against this machine: predictions from the comm table's allreduce fit
and the measured single-worker runs, beside the measured multi-worker runs of the results table.

prediction error = predicted throughput / measured throughput - 1 (median over repeats).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from harness.base import network
from harness.base.registry import UnknownName
from harness.contract.axes import STRATEGIES, ModelledExchange
from harness.contract.workloads import BERT_BASE_PRETRAINING_PARAMS, RESNET50_PARAMS
from harness.reports import aggregate
from harness.scaling.model import (
    GRADIENT_BYTES_PER_PARAMETER,
    AlphaBeta,
    Link,
    Network,
    fit_alpha_beta,
    link_from_allreduce,
    predict,
)

# Parameter counts of models whose runs did not report one (the `parameters` column is preferred).
KNOWN_PARAMETERS = {("resnet50", size): RESNET50_PARAMS for size in ("tiny", "small", "full")}
KNOWN_PARAMETERS[("bert", "full")] = BERT_BASE_PRETRAINING_PARAMS


def backend_of(device: str) -> str:
    """The backend a torch_ddp run uses on ``device`` (its worker picks NCCL on GPUs, gloo on CPUs)."""
    return "nccl" if device == "cuda" else "gloo"


def allreduce_fits(comm: pd.DataFrame) -> dict[tuple[str, int], AlphaBeta]:
    """Alpha-beta fit of allreduce time (median of the slowest rank) vs bytes, per backend and world
    size, from the latest comm sweep that measured that pair."""
    ok = comm[(comm["status"] == "ok") & (comm["collective"] == "allreduce") & (comm["world_size"] >= 2)]
    fits = {}
    for (backend, world), group in ok.groupby(["backend", "world_size"]):
        latest = group[group["sweep_id"] == group.sort_values("timestamp")["sweep_id"].iloc[-1]]
        try:
            fits[(str(backend), int(world))] = fit_alpha_beta(latest["bytes"].astype(float).tolist(),
                                                              latest["time_p50_s"].astype(float).tolist())
        except ValueError:
            continue
    return fits


def _nearest_fit(fits: dict[tuple[str, int], AlphaBeta], backend: str, world: int):
    """The fit at ``world`` ranks, else the one with the closest world size (its link carried over)."""
    mine = [w for (b, w) in fits if b == backend]
    if not mine:
        return None, None
    best = min(mine, key=lambda w: (abs(w - world), w))
    return fits[(backend, best)], best


def gradient_bytes(rows: pd.DataFrame, workload: str, size: str) -> float | None:
    """float32 gradient bytes of the model the rows ran: parameters x 4."""
    params = rows["parameters"].dropna()
    count = int(params.iloc[0]) if len(params) else KNOWN_PARAMETERS.get((workload, size))
    return None if count is None else float(count * GRADIENT_BYTES_PER_PARAMETER)


# What must match between a multi-worker configuration and the single-worker run it is predicted from
# (launcher and network may differ: one worker has no network to cap; the strategy preferably matches,
# else the plain allreduce run gives the single-worker step time).
BASE_KEYS = ["sweep_id", "scenario", "framework", "workload", "size", "storage", "batch_per_worker",
             "device", "sample_unit"]


def _exchange(strategy: str) -> tuple[ModelledExchange | None, str]:
    """The strategy's declared exchange (harness.contract.axes.StrategyKind), or None and why there is none."""
    try:
        kind = STRATEGIES.get(strategy)
    except UnknownName:  # a row of a strategy since renamed or removed
        return None, "not a strategy this version knows"
    return kind.exchange, kind.unmodelled


def _strategy_options(results: pd.DataFrame) -> dict[str, Any]:
    """The rows' resolved strategy options (the first row that records them; {} if none do)."""
    import json

    if "strategy_options" not in results:
        return {}
    return next((json.loads(text) for text in results["strategy_options"].dropna()), {})


def _option_count(options: dict[str, Any], option: str) -> int:
    """The option's count (steps between exchanges, servers) from the resolved options; 1 without it."""
    return int(options.get(option) or 1) if option else 1


def capped_link(link: Link, network_value: str | None) -> Link:
    """``link`` with its bandwidth held to a ``network`` cap (harness.base.network: e.g. '1gbit'), if any."""

    if not network_value or network_value == network.UNLIMITED:
        return link
    cap = network.bits_per_s(network_value) / 8
    return Link(link.latency_s, min(link.bandwidth_Bps, cap))


def check(results: pd.DataFrame, comm: pd.DataFrame, overlap: float = 0.0) -> pd.DataFrame:
    """Per measured multi-worker configuration with a single-worker run in the same sweep (same model,
    batch and device): the predicted and measured throughput and efficiency, and the prediction error.
    The exchange follows the run's strategy's declared ``exchange``; a run with a ``network`` cap is predicted
    with the fitted link's bandwidth held to the cap."""
    fits = allreduce_fits(comm)
    summary = aggregate.summarize(results)
    out: list[dict[str, Any]] = []
    if summary.empty:
        return pd.DataFrame(out)
    measured = summary[summary["throughput_median"].notna()]
    for _, group in measured.groupby(BASE_KEYS, dropna=False):
        singles = group[group["world_size"] == 1]
        if singles.empty:
            continue
        first = singles.iloc[0]
        keys = {k: first[k] for k in BASE_KEYS}
        mask = (results["sweep_id"] == first["sweep_id"]) & (results["workload"] == first["workload"]) & \
               (results["size"] == first["size"])
        grad = gradient_bytes(results[mask], str(first["workload"]), str(first["size"]))
        backend = backend_of(str(first["device"]))
        for _, row in group[group["world_size"] > 1].iterrows():
            strategy = str(row["strategy"])
            same = singles[singles["strategy"] == strategy]
            base = (same if len(same) else singles[singles["strategy"] == "allreduce"]
                    if (singles["strategy"] == "allreduce").any() else singles).iloc[0]
            step_1 = base["batch_per_worker"] / base["throughput_median"]
            world = int(row["world_size"])
            net_value = row.get("network")  # the summary shows a table's empty dimension as UNKNOWN
            net_value = None if pd.isna(net_value) or net_value == aggregate.UNKNOWN else net_value
            fit, fit_world = _nearest_fit(fits, backend, world)
            measured_tp = row["throughput_median"]
            exchange, unmodelled = _exchange(strategy)
            entry = {**keys, "strategy": strategy, "world_size": world, "nodes": int(row["nodes"]),
                     "network": net_value, "backend": backend, "step_time_1_s": step_1, "gradient_bytes": grad,
                     "measured_throughput": measured_tp,
                     "measured_efficiency": measured_tp / (world * base["throughput_median"]),
                     # per-worker step time implied by the measured throughput: T_N = N x batch / throughput
                     "measured_step_s": world * row["batch_per_worker"] / measured_tp}
            if fit is None or grad is None or exchange is None:
                entry["note"] = (f"no {backend} allreduce measurement: run `rosetta comm`" if fit is None
                                 else "parameter count unknown" if grad is None
                                 else f"no model of strategy {strategy}: {unmodelled}")
                out.append(entry)
                continue
            options = _strategy_options(results[mask & (results["strategy"] == strategy)])
            algorithm, share = exchange.algorithm, exchange.share_for(options)
            tau = _option_count(options, exchange.steps_option)
            servers = _option_count(options, exchange.servers_option)
            net = Network.single(capped_link(link_from_allreduce(fit, fit_world), net_value))
            p = predict(step_1, int(row["batch_per_worker"]), grad * share, world, algorithm, net, tau=tau,
                        overlap=overlap, servers=servers)
            entry.update(algorithm=algorithm.value, tau=tau, fit_world_size=fit_world, overlap=overlap,
                         alpha_s=fit.alpha_s, beta_GBps=fit.beta_Bps / 1e9, comm_time_s=p.comm_time_s,
                         predicted_throughput=p.throughput, predicted_efficiency=p.efficiency,
                         error=p.throughput / measured_tp - 1)
            out.append(entry)
    return pd.DataFrame(out)


SUPERLINEAR = 1.05  # measured efficiency above this is not communication's doing


def report(results_dir: Path, overlap: float = 0.0, table: pd.DataFrame | None = None) -> list | None:
    """The scaling model's predictions against the measured runs in ``results_dir`` (or in ``table``, some
    of its rows), as rich renderables to print; None if there is nothing to compare (no comm or training
    table)."""
    from harness.comm import results as comm_results
    from harness.results import table as results

    if not (Path(results_dir) / comm_results.PARQUET).exists():
        return None
    table = results.load(results_dir) if table is None else table
    if table.empty:
        return None
    return check_items(check(table, comm_results.load(results_dir), overlap=overlap))


def check_items(table: pd.DataFrame) -> list:
    """The check as a rich table, then the allreduce fits, the mean absolute error and a warning on
    superlinear baselines."""
    from rich.text import Text

    if table.empty:
        return ["scaling model check: no sweep has both a 1-worker and a multi-worker run measured"]
    items: list = [_check_table(table)]
    if "alpha_s" in table:
        fits = table.dropna(subset=["alpha_s"]).drop_duplicates(["backend", "fit_world_size"])
        items += [Text(f"allreduce fit, {r['backend']} x{int(r['fit_world_size'])}: t = {r['alpha_s'] * 1e6:.1f} us"
                       f" + bytes / {r['beta_GBps']:.3f} GB/s") for _, r in fits.iterrows()]
    if "error" in table and table["error"].notna().any():
        items.append(f"mean absolute prediction error: {table['error'].abs().mean():.0%} over "
                     f"{int(table['error'].notna().sum())} configurations. T_N meas. - T_1 is what N workers "
                     "really added per step; beside the predicted allreduce time it tells the network's share "
                     "from the rest (on a CPU machine: N processes also split the cores one process had).")
    superlinear = table[table["measured_efficiency"] > SUPERLINEAR]
    if len(superlinear):
        items.append(f"[yellow]{len(superlinear)} configurations measured above {SUPERLINEAR:.0%} efficiency"
                     "[/yellow]: each of N workers stepped faster than the single worker did, which no "
                     "communication model explains. The baseline is suspect: on a shared CPU machine the single "
                     "process gets every core as threads (threads per rank = cores / processes), and threads that "
                     "wait on each other lose most when other work takes the cores; measure when the machine is "
                     "quiet.")
    return items


def _check_table(table: pd.DataFrame):
    from rich.table import Table

    overlap = table["overlap"].dropna().iloc[0] if "overlap" in table and table["overlap"].notna().any() else 0.0
    out = Table(title="Scaling model vs measurement on this machine (alpha-beta fit of `rosetta comm`, "
                      f"T_N = T_1 + (1 - {overlap:g}) x exchange time of the run's strategy)")
    for col in ("workload", "strategy", "batch/worker", "device", "world", "network", "backend", "T_1 ms", "gradient MB",
                "exchange ms", "T_N ms pred.", "T_N ms meas.", "predicted/s", "measured/s", "pred. eff.", "meas. eff.", "error"):
        out.add_column(col, justify="right")
    for _, r in table.iterrows():
        has = "error" in r and not pd.isna(r.get("error"))
        out.add_row(f"{r['workload']}/{r['size']}", str(r["strategy"]), str(r["batch_per_worker"]), str(r["device"]),
                    f"{r['nodes']}x{r['world_size'] // r['nodes']}",
                    "-" if pd.isna(r.get("network")) else str(r["network"]), r["backend"], f"{r['step_time_1_s'] * 1e3:.1f}",
                    "-" if r["gradient_bytes"] is None else f"{r['gradient_bytes'] / 1e6:.1f}",
                    f"{r['comm_time_s'] * 1e3:.1f}" if has else "-",
                    f"{(r['step_time_1_s'] + r['comm_time_s']) * 1e3:.1f}" if has else "-",
                    f"{r['measured_step_s'] * 1e3:.1f}",
                    f"{r['predicted_throughput']:.2f}" if has else "-", f"{r['measured_throughput']:.2f}",
                    f"{r['predicted_efficiency']:.0%}" if has else "-",
                    "-" if math.isnan(r["measured_efficiency"]) else f"{r['measured_efficiency']:.0%}",
                    f"{r['error']:+.0%}" if has else str(r.get("note")))
    return out
