"""``rosetta project``'s report: the projection of :mod:`harness.scaling.projection` for one request (an
interconnect, a link within the node, a baseline, the algorithms' settings) as a table of predicted
efficiency per GPU count and algorithm, the figures and assumptions behind it and its chart, as rich
renderables for the command to print."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.scaling import projection
from harness.scaling.model import Network


@dataclass(frozen=True)
class ProjectionRequest:
    """What to project (``rosetta project``'s options, checked by the command)."""

    results: Path  # the results folder: the default chart's folder, and a measured:BACKEND link's fits
    interconnect: str = "25GbE"  # link between nodes: a preset or measured:BACKEND
    intra: str = "NVLink"  # link within a node: a preset or measured:BACKEND
    gpus_per_node: int = 8
    baseline: str = "resnet50-v100"  # a published single-GPU figure (a preset)
    step_time_s: float | None = None  # single-GPU step time (s), instead of the baseline's
    batch: int | None = None  # batch per GPU, instead of the baseline's
    parameters: int | None = None  # model parameters, instead of the baseline's
    workers: tuple[int, ...] = projection.DEFAULT_WORKERS  # GPU counts
    tau: int = 8  # local SGD: steps between averagings
    servers: int = 1  # parameter servers sharing the model
    overlap: float = 0.0  # share of communication hidden behind compute, 0..1
    presets: Path = projection.PRESETS_FILE
    published: bool = True  # published results on the chart
    chart: Path | None = None  # default: <results>/project-<interconnect>-<baseline>.png


def projection_report(request: ProjectionRequest) -> list:
    """Project ``request``, write its chart; returns what to print (the table, the figures, the chart's path)."""
    presets = projection.load_presets(request.presets)

    def link(name: str, what: str):
        if name.startswith(projection.MEASURED_PREFIX):
            return projection.measured_link(request.results, name.removeprefix(projection.MEASURED_PREFIX))
        return projection.pick(presets.links, name, what)

    inter, intra = link(request.interconnect, "interconnect"), link(request.intra, "intra")
    base = projection.pick(presets.baselines, request.baseline, "baseline")
    step = request.step_time_s or base.step_time_s
    batch = request.batch or base.batch_per_worker
    params = request.parameters or base.parameters
    net = Network(projection.model_link(intra), projection.model_link(inter), request.gpus_per_node)
    table = projection.project(step, batch, params, net, tuple(request.workers), tau=request.tau,
                               overlap=request.overlap, servers=request.servers)
    from rich.text import Text

    items: list = [_table(table, request, intra.title, inter.title)]
    items.append(Text(f"single GPU: {step * 1e3:.1f} ms per step of batch {batch}, {params:,} parameters "
                      f"({params * 4 / 1e6:.1f} MB of float32 gradients)"
                      + ("" if request.step_time_s else f" from {base.title} ({base.source})")))
    items += [Text(f"{name}: {preset.bandwidth_GBps:.3g} GB/s, {preset.latency_us:.3g} us per step; {preset.source}")
              for name, preset in ((request.intra, intra), (request.interconnect, inter))]
    items.append(Text("assumptions: T_N = T_1 + (1 - overlap) x exchange time; weak scaling (fixed batch per GPU); "
                      f"overlap = {request.overlap}; gradients float32 in one piece; 1-bit SGD sends 1/32 of the "
                      "bytes plus 2 float32 scales per 512 values, compression compute not counted"))
    suffix = f"{request.interconnect}-{request.baseline}".replace("/", "_").replace(":", "-")
    chart = projection.plot(table, request.chart or request.results / f"project-{suffix}.png",
                            f"{base.title if not request.step_time_s else 'custom'}: {request.gpus_per_node} "
                            f"GPUs/node, {request.intra} in node, {request.interconnect} between nodes\n(published "
                            f"results: other machines, networks and frameworks, for shape only)",
                            published=request.published)
    items.append(f"chart: {chart}")
    return items


def _table(table: pd.DataFrame, request: ProjectionRequest, intra: str, inter: str):
    """Efficiency (throughput, samples/s) per GPU count, a column per algorithm."""
    from rich.table import Table

    out = Table(title=f"Predicted scaling efficiency (throughput, samples/s): {request.gpus_per_node} GPUs per node "
                      f"on {intra}, nodes on {inter}")
    out.add_column("GPUs", justify="right")
    algorithms = list(dict.fromkeys(table["algorithm"]))
    label = {"local_sgd": f"local_sgd (tau {request.tau})", "parameter_server": f"parameter_server ({request.servers})"}
    for a in algorithms:
        out.add_column(label.get(a, a), justify="right")
    for n, g in table.groupby("workers", sort=True):
        cells = [str(n)]
        for a in algorithms:
            r = g[g["algorithm"] == a].iloc[0]
            cells.append(f"{r['efficiency']:.0%} ({r['throughput']:,.0f})")
        out.add_row(*cells)
    return out
