"""The scaling model against cases computed by hand."""

import math

import pytest

from harness.contract.axes import CommAlgorithm
from harness.scaling.model import (
    AlphaBeta,
    Link,
    Network,
    comm_time_s,
    fit_alpha_beta,
    hierarchical_s,
    link_from_allreduce,
    onebit_bytes,
    predict,
    ring_allreduce_s,
)


def test_fit_recovers_an_exact_line():
    # t = 50 us + bytes / 1 GB/s at 4 B, 1 MB, 100 MB
    sizes = [4, 1e6, 1e8]
    times = [50e-6 + 4 / 1e9, 50e-6 + 1e-3, 50e-6 + 0.1]
    fit = fit_alpha_beta(sizes, times)
    assert fit.alpha_s == pytest.approx(50e-6, rel=1e-9)
    assert fit.beta_Bps == pytest.approx(1e9, rel=1e-9)


def test_fit_minimizes_relative_error():
    # Two sizes, three times: (0 B: 1 s), (1000 B: 2 s and 4 s). Rows (1/t, b/t) = (1, 0), (0.5, 500),
    # (0.25, 250), right-hand side 1; least squares over (a, x = 1/beta):
    # d/da: 1.3125a + 312.5x = 1.75;  d/dx: 312.5a + 312500x = 750
    # => a = (1.75*312500 - 312.5*750) / (1.3125*312500 - 312.5^2) = 312500/312500 = 1.0
    #    x = (750 - 312.5) / 312500 = 0.0014 -> beta = 714.2857 B/s
    fit = fit_alpha_beta([0, 1000, 1000], [1.0, 2.0, 4.0])
    assert fit.alpha_s == pytest.approx(1.0)
    assert fit.beta_Bps == pytest.approx(1 / 0.0014)


def test_fit_holds_alpha_at_zero_and_rejects_flat_times():
    # t = bytes / 100 with noise pulling alpha negative: 10 B -> 0.09 s, 1000 B -> 10 s.
    fit = fit_alpha_beta([10, 1000], [0.09, 10.0])
    assert fit.alpha_s == 0.0
    # alpha = 0: x = sum(b/t) / sum((b/t)^2) = (111.11 + 100) / (12345.68 + 10000)
    x = (10 / 0.09 + 100) / ((10 / 0.09) ** 2 + 100**2)
    assert fit.beta_Bps == pytest.approx(1 / x)
    with pytest.raises(ValueError):
        fit_alpha_beta([10, 1000], [1.0, 0.5])  # faster for more bytes
    with pytest.raises(ValueError):
        fit_alpha_beta([10], [1.0])


def test_link_from_a_two_worker_fit_is_busbw():
    # allreduce over 2 workers: 2(n-1) = 2 steps, 2(n-1)/n = 1: latency alpha/2, bandwidth beta
    link = link_from_allreduce(AlphaBeta(100e-6, 2e9), 2)
    assert link == Link(50e-6, 2e9)
    # over 4 workers: 6 steps, factor 1.5
    link = link_from_allreduce(AlphaBeta(60e-6, 1e9), 4)
    assert link.latency_s == pytest.approx(10e-6) and link.bandwidth_Bps == pytest.approx(1.5e9)
    with pytest.raises(ValueError):
        link_from_allreduce(AlphaBeta(1, 1), 1)


def test_ring_allreduce_by_hand():
    link = Link(10e-6, 1e9)
    assert ring_allreduce_s(1e8, 1, link) == 0.0
    # 4 workers, 100 MB: 6 x 10 us + 1.5 x 0.1 s = 0.15006 s
    assert ring_allreduce_s(1e8, 4, link) == pytest.approx(0.15006)
    # the fit and the link describe the same time at the fitted world size
    fit = AlphaBeta(123e-6, 3e9)
    assert ring_allreduce_s(5e7, 3, link_from_allreduce(fit, 3)) == pytest.approx(fit.time(5e7))


def test_hierarchical_by_hand():
    # 16 workers, 8 per node -> 2 nodes. Intra: 1 us, 100 GB/s; inter: 10 us, 10 GB/s. 1 GB.
    net = Network(Link(1e-6, 100e9), Link(10e-6, 10e9), 8)
    intra = 14 * 1e-6 + 14 / 8 * 1e9 / 100e9  # 0.017514
    inter = 2 * 10e-6 + 1 * 1e9 / 10e9  # 0.10002
    assert hierarchical_s(1e9, 16, net) == pytest.approx(intra + inter)
    # flat ring over 16 across nodes: 30 x 10 us + 30/16 x 0.1 s
    assert comm_time_s(CommAlgorithm.RING, 1e9, 16, net) == pytest.approx(30e-5 + 0.1875)
    # within one node both are the intra ring
    assert comm_time_s(CommAlgorithm.RING, 1e9, 8, net) == pytest.approx(hierarchical_s(1e9, 8, net))


def test_onebit_and_local_sgd_by_hand():
    # ResNet-50: 25,557,032 parameters = 102,228,128 bytes; 1 bit each = 3,194,629 bytes;
    # ceil(25,557,032 / 512) = 49,917 buckets x 8 bytes = 399,336 bytes.
    assert onebit_bytes(25_557_032 * 4) == pytest.approx(3_194_629 + 399_336)
    net = Network.single(Link(0.0, 1e9))
    full = comm_time_s(CommAlgorithm.HIERARCHICAL, 4e8, 2, net)
    assert full == pytest.approx(0.4)
    assert comm_time_s(CommAlgorithm.LOCAL_SGD, 4e8, 2, net, tau=8) == pytest.approx(0.05)
    assert comm_time_s(CommAlgorithm.ONEBIT, 4e8, 2, net) == pytest.approx(onebit_bytes(4e8) / 1e9)


def test_predict_by_hand():
    # T1 = 0.2 s, batch 32, 100 MB gradients over 2 workers on a 1 GB/s link with no latency:
    # comm = 2(1)/2 x 0.1 s = 0.1 s; T2 = 0.3 s; throughput = 64 / 0.3; efficiency = 2/3.
    p = predict(0.2, 32, 1e8, 2, CommAlgorithm.RING, Network.single(Link(0.0, 1e9)))
    assert p.step_time_s == pytest.approx(0.3)
    assert p.throughput == pytest.approx(64 / 0.3)
    assert p.efficiency == pytest.approx(2 / 3)
    half = predict(0.2, 32, 1e8, 2, CommAlgorithm.RING, Network.single(Link(0.0, 1e9)), overlap=0.5)
    assert half.efficiency == pytest.approx(0.2 / 0.25)
    one = predict(0.2, 32, 1e8, 1, CommAlgorithm.RING, Network.single(Link(0.0, 1e9)))
    assert one.efficiency == 1.0 and math.isclose(one.throughput, 160)
    with pytest.raises(ValueError):
        predict(0.0, 32, 1e8, 2, CommAlgorithm.RING, Network.single(Link(0.0, 1e9)))


def test_pipeline_bubble_and_step_time():
    from harness.scaling.model import Link, pipeline_bubble, predict_pipeline

    assert pipeline_bubble(1, 8) == 0 and pipeline_bubble(4, 4) == pytest.approx(3 / 7)
    free = Link(0.0, float("inf"))  # no transfer cost: the speed-up is p m / (m + p - 1)
    for p, m in ((2, 4), (4, 32), (8, 32)):
        prediction = predict_pipeline(1.0, p, m, 1e6, free)
        assert prediction.speedup == pytest.approx(p * m / (m + p - 1))
        assert prediction.bubble == pytest.approx((p - 1) / (m + p - 1))
    # 2 stages, 4 microbatches, 8 MB of activations on a 1 GB/s link with 10 us latency:
    # 5 slots x (1/8 s + 2 x (1e-5 + 2e-3)) = 0.6451 s
    slow = predict_pipeline(1.0, 2, 4, 8e6, Link(1e-5, 1e9))
    assert slow.step_time_s == pytest.approx(5 * (1 / 8 + 2 * (1e-5 + 2e-3)))
    assert slow.activation_time_s == pytest.approx(5 * 2 * (1e-5 + 2e-3))
    assert predict_pipeline(1.0, 1, 4, 8e6, Link(1e-5, 1e9)).speedup == pytest.approx(1.0)


def test_hybrid_exchange_by_hand():
    from harness.scaling.model import flat_ring_s, hybrid_s, ring_allgather_s

    link = Link(1e-5, 1e9)
    net = Network.single(link)
    assert ring_allgather_s(1e6, 1, link) == 0 and ring_allgather_s(1e6, 4, link) == pytest.approx(3 * (1e-5 + 1e-3))
    # ResNet-50 (23,508,032 trunk parameters, 2048 features, 1000 classes), 32 images a worker, 8 workers:
    # trunk 2 x 7 x (1e-5 + 94,032,128 / 8 / 1e9); labels 7 x (1e-5 + 256 / 1e9); features and logits each
    # 2 x 7 x (1e-5 + piece / 1e9) with pieces of 32 x 2048 x 4 and 32 x 1000 x 4 bytes
    trunk = 23_508_032 * 4
    by_hand = (14 * (1e-5 + trunk / 8 / 1e9) + 7 * (1e-5 + 256 / 1e9)
               + 14 * (1e-5 + 32 * 2048 * 4 / 1e9) + 14 * (1e-5 + 32 * 1000 * 4 / 1e9))
    assert hybrid_s(trunk, 32, 2048, 1000, 8, net) == pytest.approx(by_hand)
    # one worker: nothing to exchange
    assert hybrid_s(trunk, 32, 2048, 1000, 1, net) == 0
    # against plain allreduce of the whole model (trunk + 2048 x 1000 + 1000 classifier): the hybrid saves
    # 2(n-1)/n x the classifier's 8.2 MB and pays 4(n-1) x b x (2048 + 1000) x 4 bytes: at b = 32 it sends less
    # (7 x 1.56 MB < 14.3 MB), at b = 256 more (7 x 12.5 MB); the trick is for classifiers larger than the batch
    whole = trunk + (2048 * 1000 + 1000) * 4
    free = Network.single(Link(0.0, 1e9))  # bytes only
    assert hybrid_s(trunk, 32, 2048, 1000, 8, free) < flat_ring_s(whole, 8, free)
    assert hybrid_s(trunk, 256, 2048, 1000, 8, free) > flat_ring_s(whole, 8, free)
