"""The scaling model's prediction of a reference's published curve, and its error per point.

From each published series' first figure (the 1-GPU throughput at its batch) and the reference's
stated interconnect (``[published]`` links, presets in interconnects.toml), the model
(:func:`harness.scaling.model.predict`) predicts the efficiency at every published GPU count;
the error is predicted minus published efficiency, in percentage points. Assumptions as in the
model: fixed batch per GPU, fp32 gradients sent in one piece, no overlap of communication with
compute (so the prediction is a lower bound where the source overlaps).

``reproduction_report``: ``rosetta reproduce``'s report, the measured sweep beside the published figures and
these predictions.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from harness.contract.axes import CommAlgorithm, Size, Workload
from harness.contract.workloads import WORKLOADS
from harness.reproduction.reference import PublishedRun, Reference
from harness.scaling import projection
from harness.scaling.model import GRADIENT_BYTES_PER_PARAMETER, Network, predict

PREDICTED = "predicted"  # the comparison table's source for the model's rows


def network_for(ref: Reference, inter_link: str = "", intra_link: str = "") -> Network:
    """The reference's network: its (or a series') in-node link, and between nodes its (or a series') inter link."""
    pub = ref.published
    links = projection.load_presets().links
    intra = projection.model_link(projection.pick(links, intra_link or pub.intra_link, "link"))
    inter_name = inter_link or pub.inter_link
    inter = projection.model_link(projection.pick(links, inter_name, "link")) if inter_name else intra
    return Network(intra, inter, pub.gpus_per_node)


def samples_per_item(ref: Reference, run: PublishedRun | None = None) -> int:
    """Samples one sequence of the published workload (``run``'s series') counts as (its tokens for a decoder;
    1 otherwise)."""
    info = WORKLOADS[Workload(ref.published.workload_of(run) if run else ref.published.workload)]
    return info.samples_per_item(info.options(Size(ref.published.size)))


def predicted_rows(ref: Reference) -> pd.DataFrame:
    """Tidy rows (source "predicted", series, workers, throughput, unit, efficiency, published
    efficiency, error_pp) for every published series the configuration says how to run and whose
    first figure is a throughput; empty when the reference has no ``[published]`` table."""
    rows: list[dict] = []
    if ref.published is None:
        return pd.DataFrame(rows)
    series = {s.label: s for s in ref.series}
    algorithm = CommAlgorithm(ref.published.algorithm)
    for run in ref.published.runs:
        s = series[run.series]
        if not s.throughput:
            continue
        grad = ref.published.parameters_of(run) * GRADIENT_BYTES_PER_PARAMETER
        n0 = s.gpus[0]
        # s per step on one GPU at the first point's rate (a batch's samples: its tokens where the unit is tokens)
        step_1 = run.batch_per_worker * samples_per_item(ref, run) / (s.throughput[0] / n0)
        net = network_for(ref, run.inter_link, run.intra_link)
        base = predict(step_1, run.batch_per_worker, grad, n0, algorithm, net)
        for n, published in zip(s.gpus, s.efficiencies()):
            p = predict(step_1, run.batch_per_worker, grad, n, algorithm, net)
            efficiency = p.efficiency / base.efficiency  # relative to the first point, as published
            rows.append({"source": PREDICTED, "series": run.series, "workers": n,
                         "throughput": s.throughput[0] * n / n0 * efficiency, "unit": ref.unit,
                         "efficiency": efficiency, "published_efficiency": published,
                         "error_pp": (efficiency - published) * 100 if not math.isnan(published) else math.nan})
    return pd.DataFrame(rows)


def mean_abs_error_pp(rows: pd.DataFrame) -> float:
    """Mean absolute prediction error over the points beyond each series' first (percentage points)."""
    if rows.empty:
        return math.nan
    beyond = rows[rows.groupby("series")["workers"].transform("min") < rows["workers"]]
    return float(beyond["error_pp"].abs().mean()) if len(beyond) else math.nan


def reproduction_report(ref: Reference, results_dir: Path, sweep: str) -> list:
    """Published, measured and predicted side by side: writes the chart and the Markdown report; returns
    what to print (the summary table and its notes, the findings, the paths written). ``sweep``: one sweep id,
    or several joined by commas (``--at emulated`` runs a sweep per set of series with their own links)."""
    from rich.text import Text

    from harness.base.errors import UserError
    from harness.reports import aggregate, charts, terminal
    from harness.reproduction import emulated_reproduction, reproduce, tau
    from harness.results import table as results

    table = results.load(results_dir)
    sweeps = sweep.split(",")
    table = table[table["sweep_id"].isin(sweeps)]
    if table.empty:
        raise UserError(f"--sweep: no sweep {sweep!r} in {results_dir}")
    sweep, shown = sweeps[0], ", ".join(sweeps)  # the files written are named by the first
    summary = aggregate.summarize(table)
    predicted = predicted_rows(ref)
    both = reproduce.comparison_table(ref, summary, predicted)
    emulated = emulated_reproduction.error_lines(ref, table, predicted)  # empty unless --at emulated
    chart = reproduce.plot(ref, both, results_dir / f"reproduce-{ref.id}-{sweep}.png")
    extra = {}
    if aggregate.compares_strategies(summary):  # SparkNet, 1-bit SGD: throughput, bytes and time to target
        extra["Strategies side by side"] = charts.plot_strategies(
            summary, results_dir / f"reproduce-{ref.id}-{sweep}-strategies.png")
    curve = tau.points(table)  # SparkNet's speed-up against tau, where the sweeps hold several taus
    if tau.sweeps_tau(curve):
        extra["Speed-up against tau"] = tau.plot(curve, results_dir / f"reproduce-{ref.id}-{sweep}-tau.png")
    lines = [*emulated, *(tau.lines(curve) if tau.sweeps_tau(curve) else []),
             *reproduce.findings(ref, both, summary, reduced_run=not emulated)]
    doc = reproduce.write_markdown(ref, both, chart, results_dir / f"reproduce-{ref.id}-{sweep}.md", shown,
                                   summary, extra, lines)
    return [*terminal.summary_items(summary), *(Text(f"- {line}") for line in lines),
            *(f"chart: {path}" for path in (chart, *extra.values())), f"report: {doc}"]
