"""``rosetta project``: the scaling model where no machine here reaches, 8 to 1024 GPUs.

Interconnects and single-GPU baselines are data (harness/machines/interconnects.toml, format 1):
the network between nodes is one link preset, the link within a node another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from harness.base.errors import UserError
from harness.comm import results as comm_results
from harness.contract.axes import CommAlgorithm
from harness.machines.interconnects import INTERCONNECTS_FILE, LinkPreset, load_presets  # noqa: F401 (re-exported)
from harness.reports.charts import save_figure
from harness.scaling import check as scaling_check
from harness.scaling.model import GRADIENT_BYTES_PER_PARAMETER, Link, Network, link_from_allreduce, predict

PRESETS_FILE = INTERCONNECTS_FILE  # the links are the emulated cluster's too
DEFAULT_WORKERS = tuple(2 ** k for k in range(3, 11))  # 8 .. 1024


def model_link(preset: LinkPreset) -> Link:
    """A preset as the scaling model's link."""
    return Link(preset.latency_s, preset.bandwidth_Bps)


MEASURED_PREFIX = "measured:"  # e.g. measured:gloo: the link fitted to this machine's `rosetta comm`


def measured_link(results_dir: Path, backend: str) -> LinkPreset:
    """A link preset from the latest allreduce fit of ``backend`` in ``results_dir``'s comm table."""

    fits = scaling_check.allreduce_fits(comm_results.load(results_dir))
    mine = sorted(w for (b, w) in fits if b == backend)
    if not mine:
        raise UserError(f"{MEASURED_PREFIX}{backend}: no {backend} allreduce in {results_dir}; run `rosetta comm`")
    link = link_from_allreduce(fits[(backend, mine[0])], mine[0])
    return LinkPreset(title=f"{backend} as measured here ({mine[0]} ranks)", bandwidth_GBps=link.bandwidth_Bps / 1e9,
                      latency_us=link.latency_s * 1e6,
                      source=f"alpha-beta fit of this machine's `rosetta comm` allreduce, {mine[0]} ranks")


def pick(presets: Mapping[str, Any], name: str, what: str) -> Any:
    if name not in presets:
        raise UserError(f"--{what}: unknown {what} {name!r}; allowed: {', '.join(presets)}")
    return presets[name]


def project(step_time_1_s: float, batch_per_worker: int, parameters: int, net: Network,
            workers: tuple[int, ...] = DEFAULT_WORKERS,
            algorithms: tuple[CommAlgorithm, ...] = tuple(CommAlgorithm), *, tau: int = 8,
            overlap: float = 0.0, servers: int = 1) -> pd.DataFrame:
    """One row per algorithm and worker count: predicted step time (s), throughput, efficiency."""
    grad = parameters * GRADIENT_BYTES_PER_PARAMETER
    rows = []
    for algorithm in algorithms:
        for n in workers:
            p = predict(step_time_1_s, batch_per_worker, grad, n, algorithm, net, tau=tau, overlap=overlap,
                        servers=servers)
            rows.append({"algorithm": algorithm.value, "workers": n, "step_time_s": p.step_time_s,
                         "comm_time_s": p.comm_time_s, "throughput": p.throughput, "efficiency": p.efficiency})
    return pd.DataFrame(rows)


# Published ResNet-50 scaling, for the chart only: (label, GPUs, N-GPU throughput, 1-GPU throughput).
# Read from /work/shared/reference-figures.md (ids in brackets). The full reference data is encoded
# as data under results/reference/ by another change (issue 7); this constant only feeds the plot.
PUBLISHED_RESNET50 = [
    ("Batch AI TF V100, InfiniBand (Intel MPI) [batchai-tf-v100]", [(4, 979), (8, 1809), (16, 3404), (32, 6514)], 357),
    ("Batch AI TF V100, TCP (Open MPI+NCCL) [batchai-tf-v100]", [(4, 1243), (8, 1247), (16, 2210), (32, 4269)], 357),
    ("Batch AI PyTorch+Horovod V100, TCP [batchai-torch-v100]", [(4, 1244), (8, 1202), (16, 2124), (32, 4080)], 331),
    ("DLE PyTorch DGX-1 V100 NVLink FP32 [dle-torch-rn50-v100]", [(8, 2855)], 367),
    ("TF K80 EC2 distributed [tf-docs-k80-distributed]", [(8, 378), (32, 1388), (64, 2744)], 52.4),
    ("DLPerf NGC PyTorch 4x8 V100 [dlperf-rn50-4x8]", [(32, 10917)], 10917 / 29.7),
]
# Stated efficiencies (not computed from throughputs): Horovod, 25GbE RoCE, ResNet-101 (not 50).
PUBLISHED_STATED = [("Horovod ResNet-101, 25GbE RoCE (stated) [horovod-docs-128gpu]", [(128, 0.90), (512, 0.90)]),
                    ("Goyal et al. Caffe2 P100, Ethernet (about) [goyal-2017]", [(256, 0.90)])]


def published_points() -> list[tuple[str, list[tuple[int, float]]]]:
    """(label, [(GPUs, efficiency)]) of the published results above."""
    out = [(label, [(n, tp / (n * one)) for n, tp in points]) for label, points, one in PUBLISHED_RESNET50]
    return out + PUBLISHED_STATED


def plot(table: pd.DataFrame, path: Path, title: str, published: bool) -> Path:
    """Predicted efficiency vs GPUs per algorithm; published results as markers beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(14, 5.5))
    for algorithm, g in table.groupby("algorithm", sort=False):
        ax.plot(g["workers"], g["efficiency"] * 100, marker="o", label=f"predicted: {algorithm}")
    if published:
        markers = "sD^v<>ph*"
        for (label, points), marker in zip(published_points(), markers):
            ax.scatter([n for n, _ in points], [e * 100 for _, e in points], marker=marker, s=45,
                       label=f"published: {label}", zorder=3)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("scaling efficiency (% of linear)")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path)
