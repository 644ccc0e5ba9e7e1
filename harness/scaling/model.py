"""A scaling model of data-parallel training: alpha-beta collectives plus measured compute.

Units: seconds, bytes, bytes/s. The model (the usual one of Hockney 1994 and
Thakur, Rabenseifner & Gropp 2005 for MPI collectives, as nccl-tests uses it):

* One collective of ``m`` bytes as measured takes ``t = alpha + m / beta``
  (:func:`fit_alpha_beta` fits alpha and beta by least squares on measured times).
* A ring allreduce over ``n`` workers sends ``2(n-1)`` messages of ``m/n`` bytes per
  worker: ``t = 2(n-1) * latency + 2(n-1)/n * m / bandwidth`` with a link's latency and
  bandwidth (:class:`Link`); so a fit at ``n`` workers gives the link
  (:func:`link_from_allreduce`): bandwidth = beta x 2(n-1)/n, which is nccl-tests' busbw.
* A training step on ``N`` workers takes the single-worker step time plus the
  communication not hidden behind compute: ``T_N = T_1 + (1 - overlap) * t_comm(N)``.
  Throughput = N x batch / T_N; scaling efficiency = T_1 / T_N.

Assumptions (state them with every figure): compute per worker does not change with N
(weak scaling, fixed batch per worker); compression and averaging cost no compute;
gradients are float32 (4 bytes per parameter) and sent in one piece (no bucketing);
``overlap`` = 0 (nothing hidden) unless given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from harness.contract.axes import CommAlgorithm

GRADIENT_BYTES_PER_PARAMETER = 4  # float32
ONEBIT_BUCKET_VALUES = 512  # values per pair of float32 reconstruction scales (1-bit SGD's column)


@dataclass(frozen=True)
class AlphaBeta:
    """A collective's fitted cost: ``alpha_s + bytes / beta_Bps`` seconds."""

    alpha_s: float
    beta_Bps: float

    def time(self, size_bytes: float) -> float:
        return self.alpha_s + size_bytes / self.beta_Bps


def fit_alpha_beta(sizes: Sequence[float], seconds: Sequence[float]) -> AlphaBeta:
    """Least-squares fit of ``t = alpha + bytes / beta`` on measured (bytes, seconds) pairs.

    Each equation is divided by its measured time, so the fit minimizes *relative* errors:
    times span five orders of magnitude from 4 B to 256 MB and an absolute fit would ignore
    every small size. alpha is held at >= 0 (a negative latency is noise); a fit with no
    positive bandwidth term raises ValueError.
    """
    b = np.asarray(sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if b.shape != t.shape or len(b) < 2 or len(set(b.tolist())) < 2:
        raise ValueError("need at least two distinct sizes, one time each")
    if np.any(t <= 0):
        raise ValueError("times must be positive")
    design = np.column_stack([1 / t, b / t])  # unknowns: alpha, 1/beta; right-hand side: 1
    (alpha, inv_beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:  # refit with alpha = 0: minimize sum((b x / t - 1)^2) over x
        alpha, inv_beta = 0.0, float(np.sum(b / t) / np.sum((b / t) ** 2))
    if inv_beta <= 0:
        raise ValueError("no bandwidth term: time does not grow with size")
    return AlphaBeta(float(alpha), float(1 / inv_beta))


@dataclass(frozen=True)
class Link:
    """One hop of a ring: per-message latency (s) and bandwidth (bytes/s, each direction)."""

    latency_s: float
    bandwidth_Bps: float


def link_from_allreduce(fit: AlphaBeta, world_size: int) -> Link:
    """The link under a ring allreduce fitted at ``world_size`` workers (>= 2)."""
    if world_size < 2:
        raise ValueError("an allreduce over one worker says nothing about the link")
    steps = 2 * (world_size - 1)
    return Link(fit.alpha_s / steps, fit.beta_Bps * steps / world_size)


def ring_allreduce_s(size_bytes: float, workers: int, link: Link) -> float:
    """2(n-1) x latency + 2(n-1)/n x bytes / bandwidth; 0 for one worker."""
    if workers < 1:
        raise ValueError("workers must be >= 1")
    if workers == 1:
        return 0.0
    return 2 * (workers - 1) * link.latency_s + 2 * (workers - 1) / workers * size_bytes / link.bandwidth_Bps


@dataclass(frozen=True)
class Network:
    """Workers in nodes of ``gpus_per_node``: ``intra`` links inside a node, ``inter`` between nodes.

    ``inter.bandwidth_Bps`` is a node's network bandwidth, shared by its workers.
    """

    intra: Link
    inter: Link
    gpus_per_node: int

    @classmethod
    def single(cls, link: Link) -> "Network":
        """One node of any size with one kind of link (this machine)."""
        return cls(link, link, 1 << 30)


def flat_ring_s(size_bytes: float, workers: int, net: Network) -> float:
    """A ring over every worker: within one node the intra link; across nodes, each step waits for
    the inter link (the slowest hop sets the pace of a ring)."""
    link = net.intra if workers <= net.gpus_per_node else net.inter
    return ring_allreduce_s(size_bytes, workers, link)


def hierarchical_s(size_bytes: float, workers: int, net: Network) -> float:
    """Reduce-scatter in the node, allreduce of each shard across nodes, allgather in the node.

    The in-node part costs a ring allreduce on the intra link; the across-node rings of the
    node's ``g`` workers run side by side on m/g bytes each, sharing the node's network
    bandwidth: 2(k-1) x latency + 2(k-1)/k x m / bandwidth for ``k`` nodes.
    """
    g = min(workers, net.gpus_per_node)
    nodes = math.ceil(workers / net.gpus_per_node)
    return ring_allreduce_s(size_bytes, g, net.intra) + ring_allreduce_s(size_bytes, nodes, net.inter)


def onebit_bytes(size_bytes: float, bucket_values: int = ONEBIT_BUCKET_VALUES) -> float:
    """Bytes 1-bit SGD sends for ``size_bytes`` of float32 gradients: one bit per value plus two
    float32 reconstruction values per bucket of ``bucket_values`` (Seide et al. 2014)."""
    values = size_bytes / GRADIENT_BYTES_PER_PARAMETER
    return values / 8 + math.ceil(values / bucket_values) * 2 * GRADIENT_BYTES_PER_PARAMETER


def parameter_server_s(size_bytes: float, workers: int, net: Network, servers: int = 1) -> float:
    """Every worker pushes its gradient to the servers and pulls the model back (Downpour's step).

    Each of ``servers`` servers holds 1/servers of the model, so its link takes in
    workers x size/servers bytes and sends as many out (full duplex: in and out side by side),
    while a worker's link carries size each way: the busiest link sets the time,
    2 x latency + max(workers / servers, 1) x size / bandwidth. The servers' links are the
    network between nodes once the workers span nodes (servers on their own hosts).
    """
    if workers < 1 or servers < 1:
        raise ValueError("workers and servers must be >= 1")
    link = net.intra if workers <= net.gpus_per_node else net.inter
    return 2 * link.latency_s + max(workers / servers, 1.0) * size_bytes / link.bandwidth_Bps


def comm_time_s(algorithm: CommAlgorithm, gradient_bytes: float, workers: int, net: Network,
                tau: int = 1, servers: int = 1) -> float:
    """Seconds of gradient exchange per training step under ``algorithm``.

    1-bit SGD: the compressed bytes in a hierarchical exchange (the quantize/unquantize work
    is not counted). Local SGD: a hierarchical allreduce of the full model every ``tau`` steps.
    Parameter server: push and pull through ``servers`` servers (:func:`parameter_server_s`).
    """
    if algorithm == CommAlgorithm.PARAMETER_SERVER:
        return parameter_server_s(gradient_bytes, workers, net, servers)
    if algorithm == CommAlgorithm.RING:
        return flat_ring_s(gradient_bytes, workers, net)
    if algorithm == CommAlgorithm.HIERARCHICAL:
        return hierarchical_s(gradient_bytes, workers, net)
    if algorithm == CommAlgorithm.ONEBIT:
        return hierarchical_s(onebit_bytes(gradient_bytes), workers, net)
    if tau < 1:
        raise ValueError("tau must be >= 1")
    return hierarchical_s(gradient_bytes, workers, net) / tau


@dataclass(frozen=True)
class Prediction:
    algorithm: CommAlgorithm
    workers: int
    step_time_s: float  # predicted time of one step on every worker (s)
    comm_time_s: float  # exposed communication per step (s)
    throughput: float  # samples/s over all workers
    efficiency: float  # throughput / (workers x single-worker throughput)


def predict(step_time_1_s: float, batch_per_worker: int, gradient_bytes: float, workers: int,
            algorithm: CommAlgorithm, net: Network, *, tau: int = 1, overlap: float = 0.0,
            servers: int = 1) -> Prediction:
    """Throughput and scaling efficiency on ``workers`` from the single-worker step time (s)."""
    if step_time_1_s <= 0 or not 0 <= overlap <= 1:
        raise ValueError("step time must be positive and overlap within [0, 1]")
    comm = (1 - overlap) * comm_time_s(algorithm, gradient_bytes, workers, net, tau, servers)
    step = step_time_1_s + comm
    return Prediction(algorithm, workers, step, comm, workers * batch_per_worker / step, step_time_1_s / step)


def pipeline_bubble(stages: int, microbatches: int) -> float:
    """GPipe's idle fraction of every stage (Huang et al. 2019): (p - 1) / (m + p - 1)."""
    if stages < 1 or microbatches < 1:
        raise ValueError("stages and microbatches must be >= 1")
    return (stages - 1) / (microbatches + stages - 1)


@dataclass(frozen=True)
class PipelinePrediction:
    stages: int
    microbatches: int
    step_time_s: float  # one batch through every stage, forward and backward (s)
    bubble: float  # idle fraction of a stage from the schedule alone
    activation_time_s: float  # exposed activation transfer per step (s)
    speedup: float  # single-device step time / pipelined step time


def predict_pipeline(step_time_1_s: float, stages: int, microbatches: int, activation_bytes: float,
                     link: Link) -> PipelinePrediction:
    """A GPipe step over ``stages`` balanced stages (the model's layers cut evenly by compute).

    Each stage spends T_1 / (p m) on one microbatch (forward and backward); a stage boundary carries
    the microbatch's activation forward and its gradient back, ``activation_bytes`` (of the whole
    batch) / m each way, one message each, not overlapped with compute. The schedule takes m + p - 1
    slots, so T_p = (m + p - 1) x (T_1 / (p m) + 2 x (latency + activation_bytes / m / bandwidth)) for
    p > 1 (no transfer with one stage). Assumptions: equal stages, no recomputation, weights in place.
    """
    if step_time_1_s <= 0 or activation_bytes < 0:
        raise ValueError("step time must be positive and activation bytes >= 0")
    bubble = pipeline_bubble(stages, microbatches)
    slots = microbatches + stages - 1
    transfer = 0.0 if stages == 1 else 2 * (link.latency_s + activation_bytes / microbatches / link.bandwidth_Bps)
    step = slots * (step_time_1_s / (stages * microbatches) + transfer)
    return PipelinePrediction(stages, microbatches, step, bubble, slots * transfer, step_time_1_s / step)


def ring_allgather_s(piece_bytes: float, workers: int, link: Link) -> float:
    """A ring all-gather of one ``piece_bytes`` piece from every worker, or a ring reduce-scatter that leaves
    one such piece (summed) on each: n - 1 steps, one piece a step, (n - 1) x (latency + piece / bandwidth)."""
    if workers < 1:
        raise ValueError("workers must be >= 1")
    return (workers - 1) * (link.latency_s + piece_bytes / link.bandwidth_Bps)


def hybrid_s(trunk_bytes: float, batch_per_worker: int, feature_dim: int, classes: int, workers: int,
             net: Network, element_bytes: int = GRADIENT_BYTES_PER_PARAMETER) -> float:
    """Seconds of the hybrid's exchange per step (Krizhevsky 2014; frameworks/torch_ddp/strategies/hybrid.py), on a flat
    ring as :func:`flat_ring_s`: the trunk's gradient (the model without its classifier) in a ring allreduce,
    plus the activations of the b = ``batch_per_worker`` images of each worker: the labels' all-gather (b int64),
    the features' all-gather (b x d a worker) and, in backward, their gradient's reduce-scatter (the same pieces),
    the logits' all-gather (a worker's shard: all W b images x C / W classes, b x C values) and their gradient's
    reduce-scatter. The classifier's own gradient is not exchanged: each worker owns its classes. Against plain
    allreduce the hybrid saves 2(n-1)/n x the classifier's bytes and pays 4(n-1) x b x (d + C) values."""
    link = net.intra if workers <= net.gpus_per_node else net.inter
    features = batch_per_worker * feature_dim * element_bytes
    logits = batch_per_worker * classes * element_bytes
    forward_and_back = 2 * (ring_allgather_s(features, workers, link) + ring_allgather_s(logits, workers, link))
    labels = ring_allgather_s(batch_per_worker * 8, workers, link)
    return ring_allreduce_s(trunk_bytes, workers, link) + forward_and_back + labels
