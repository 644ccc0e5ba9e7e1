"""A sweep's report as ``rosetta run`` and ``rosetta report`` show it: the summary table and its notes, the
charts written beside the results (throughput, telemetry, where each rank's step went, storage, emulated
accelerators, frameworks and strategies side by side), the storage runs' page-cache and MLPerf Storage
verdicts, as rich renderables in order for the command to print. The scaling model's check that follows it
is the scaling wing's (harness.scaling.check.report)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def sweep_report(results_dir: Path, sweep: str | None, chart: Path | None) -> tuple[pd.DataFrame, list]:
    """Summarize sweep ``sweep`` of ``results_dir`` (default: the latest; ``all``: every sweep) and write its
    charts (the main one at ``chart``, default ``<results>/report-<sweep>.png``, the others beside it);
    returns the sweep's rows and what to print."""
    from harness.reports import aggregate, charts, rank_charts, storage_charts, storage_rules, terminal

    table, sweep = aggregate.select_sweep(results_dir, sweep)
    summary = aggregate.summarize(table)
    items = terminal.summary_items(summary)
    path = charts.plot(summary, chart or results_dir / f"report-{sweep}.png")
    items.append(f"chart: {path}")
    telemetry_chart = charts.plot_telemetry(table, path.with_name(f"{path.stem}-telemetry.png"))
    if telemetry_chart:
        items.append(f"telemetry chart: {telemetry_chart}")
    ranks_chart = rank_charts.plot_ranks(table, path.with_name(f"{path.stem}-ranks.png"))
    if ranks_chart:
        items.append(f"per-rank chart: {ranks_chart}")
    storage_chart = storage_charts.plot_storage(table, path.with_name(f"{path.stem}-storage.png"))
    if storage_chart:
        items.append(f"storage chart: {storage_chart}")
    items += emulation_items(table, path)
    items += storage_rules.storage_summary_items(table)
    if terminal.compares_frameworks(summary):
        items.append(terminal.frameworks_table(summary))
        items.append(f"frameworks chart: {charts.plot_bars(summary, path.with_name(path.stem + '-frameworks.png'))}")
    if aggregate.compares_strategies(summary):
        items.append(f"strategies chart: "
                     f"{charts.plot_strategies(summary, path.with_name(path.stem + '-strategies.png'))}")
    items.append(f"table: {results_dir / 'results.parquet'} (and results.csv)")
    return table, items


def emulation_items(table: pd.DataFrame, path: Path) -> list:
    """Emulated accelerators: the most each framework's loader and backend sustained at the AU threshold, and
    their chart (written beside ``path``); nothing without emulated runs."""
    from harness.reports import emulation

    best = emulation.max_accelerators(table)
    if best.empty:
        return []
    items = []
    for row in best.itertuples():
        cpu = " (the next size failed with the loader CPU-bound)" if row.limit_cpu_bound else ""
        items.append(f"emulated {row.accelerator} on {row.storage} ({row.framework}'s loader): "
                     f"{row.max_accelerators} kept AU at the threshold (tried {row.sizes_tried}){cpu}")
    items.append(f"emulation chart: {emulation.plot(table, path.with_name(f'{path.stem}-emulation.png'))}")
    return items
