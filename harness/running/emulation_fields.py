"""An emulated accelerator's columns of a result row (device emulated): MLPerf Storage's AU and its verdict,
and the emulated cluster's dilation and validity (harness.machines.emulated_cluster)."""

from __future__ import annotations

from typing import Any

from harness.contract.axes import Exchange, exchanges_gradients
from harness.contract.events import RankRecord
from harness.machines import emulated_cluster

CPU_SATURATED = 0.9  # busy fraction of the machine's CPUs, or of a rank's loader processes, taken as saturated


def dilation(ranks: list[RankRecord]) -> float:
    """The time dilation k of an emulated cluster's run (1 otherwise), as its ranks recorded it."""
    return float(next((r.emulation["dilation"] for r in ranks if r.emulation and r.emulation.get("dilation")), 1.0))


def emulation_fields(ranks: list[RankRecord]) -> dict[str, Any]:
    """An emulated accelerator's columns (empty otherwise): AU of the slowest rank and its verdict, how
    far the sleeps were from the profiled time, and whether the loader was CPU-bound: AU below the
    threshold, the worst rank waiting for batches at least a quarter of what AU lost, while the machine's
    CPUs or the rank's loader processes were saturated (then the pipeline's CPU, not storage, limits)."""
    reported = [r.emulation for r in ranks if r.emulation]
    if not reported:
        return {}
    first = reported[0]
    au = min(e["au"] for e in reported)
    steps = len(ranks[0].step_seconds) or 1
    host, loader = _most(reported, "host_cpu_busy"), _most(reported, "loader_busy")
    saturated = (host or 0.0) >= CPU_SATURATED or (loader or 0.0) >= CPU_SATURATED
    # the loader, not the barrier or the sleeps, lost the AU: the worst rank waited for batches at least a
    # quarter of the shortfall (with N ranks the barrier passes each step's slowest wait on to all of them)
    stall = max((r.data["data_wait_s"] / r.data["window_s"] for r in ranks if r.data), default=0.0)
    input_bound = stall >= (1 - au) / 4
    return {
        "accelerator": first["accelerator"], "compute_s": first["compute_s"], "compute_source": first["source"],
        "emulated_step": first["step"],
        "compute_error_frac": max(_sleep_error(e, steps) for e in reported),
        "au": au, "au_threshold": first["au_threshold"], "au_ok": au >= first["au_threshold"],
        "host_cpu_busy": host, "loader_busy": loader,
        "loader_cpu_bound": bool(au < first["au_threshold"] and input_bound and saturated),
        **cluster_fields(reported),
    }


def cluster_fields(reported: list[dict[str, Any]]) -> dict[str, Any]:
    """An emulated cluster's columns: its dilation, how late the schedule ran, the exchange's time where it
    runs apart from the passes, and whether this machine's CPU was what limited the step: busy over the
    window (emulated_cluster.SATURATED_CPU), or busy through an exchange that outlasted the links' own time
    (``link_exchange_s``, dilated) by more than a DILATION_MARGIN-th of the dilated step (this machine's
    copies and reductions, not the links, set that part, and it is in the step). Busy alone does not
    say it: Open MPI's ranks poll while they wait for the links. Such a row is not a prediction.
    With the emulated host's loader: its workers, rate and the share of the window the worst rank waited."""
    if not exchanges_gradients(reported[0]):
        return {"exchange": reported[0].get("exchange", "barrier")}
    k = reported[0]["dilation"]
    busy = _most(reported, "host_cpu_busy")
    exchange_busy = _most(reported, "exchange_cpu_busy")
    exchange_s = _most(reported, "exchange_s")  # dilated, a step
    step_s, link_s = reported[0]["compute_s"] * k, (reported[0].get("link_exchange_s") or 0.0) * k
    cpu_bound_exchange = (exchange_busy is not None and exchange_busy >= emulated_cluster.SATURATED_CPU
                          and exchange_s - link_s > step_s / emulated_cluster.DILATION_MARGIN)
    loader = {}
    if reported[0].get("input_workers"):  # the emulated host's loader: the worst rank's share waiting for it
        loader = {"input_workers": reported[0]["input_workers"], "input_rate": reported[0]["input_rate"],
                  "data_stall_frac": _most(reported, "input_stall")}
    return {**loader, "exchange": Exchange.GRADIENTS.value, "dilation": k,
            "step_variation": reported[0].get("step_variation"),
            "intra_link": reported[0]["intra_link"] or None, "inter_link": reported[0]["inter_link"] or None,
            # the reductions (docs/scaling.md): GPUs a process stood for, the gradients' size divisor (1: none)
            "gpus_per_rank": reported[0].get("gpus_per_rank", 1), "gradient_scale": reported[0].get("gradient_scale", 1),
            "emulation_late_s": max(e["late_s"] for e in reported) / k,
            "exchange_s": exchange_s / k if exchange_s is not None else None, "exchange_cpu_busy": exchange_busy,
            "emulation_saturated": bool((busy is not None and busy >= emulated_cluster.SATURATED_CPU)
                                        or cpu_bound_exchange)}


def _sleep_error(emulation: dict[str, Any], steps: int) -> float:
    """How far a rank's sleeps were from what they aimed at, as a fraction of it: the window's profiled
    time x its steps' factors (``planned_s``, an emulated cluster's; without it the profile's x the steps)."""
    planned = emulation.get("planned_s") or emulation["compute_s"] * steps
    return abs(emulation["slept_s"] - planned) / planned


def _most(reported: list[dict[str, Any]], key: str) -> float | None:
    """The largest of the ranks' ``key`` (None where no rank reported it)."""
    return max((e[key] for e in reported if e.get(key) is not None), default=None)
