"""The arithmetic against hand-computed values."""

import math

import pytest

from harness.results import metrics


def test_throughput_uses_all_samples_over_slowest_rank():
    # rank 0: 80 samples in 2.0 s; rank 1: 80 samples in 2.5 s -> 160 / 2.5 = 64/s
    assert metrics.run_throughput([80, 80], [2.0, 2.5]) == pytest.approx(64.0)
    # not rank 0 x world size (80 / 2.0 x 2 = 80), not the mean of rates (36/s, 32/s -> 68)
    assert metrics.run_throughput([80, 80], [2.0, 2.5]) != pytest.approx(80.0)


def test_throughput_rejects_bad_windows():
    with pytest.raises(ValueError):
        metrics.run_throughput([1], [0.0])
    with pytest.raises(ValueError):
        metrics.run_throughput([1, 2], [1.0])


def test_scaling_efficiency():
    # 1 worker: 100/s; 4 workers: 340/s -> 340 / (4 x 100) = 0.85
    assert metrics.scaling_efficiency(340.0, 4, 100.0, 1) == pytest.approx(0.85)
    # against a 2-worker baseline of 190/s: 8 workers at 700/s -> 700 / (4 x 190)
    assert metrics.scaling_efficiency(700.0, 8, 190.0, 2) == pytest.approx(700 / 760)


def test_step_times_take_slowest_rank_per_step():
    assert metrics.step_times([[0.1, 0.3, 0.2], [0.2, 0.1, 0.25]]) == [0.2, 0.3, 0.25]


def test_percentile_matches_linear_interpolation():
    values = [10, 20, 30, 40]
    assert metrics.percentile(values, 50) == pytest.approx(25.0)
    assert metrics.percentile(values, 90) == pytest.approx(37.0)  # pos 2.7 -> 30 + 0.7 x 10
    assert metrics.percentile([5], 90) == 5


def test_mean_ci95_by_hand():
    # values 10, 12, 14: mean 12, s = 2, n = 3, t(0.975, 2) = 4.303 -> half-width 4.303 x 2 / sqrt(3)
    low, high = metrics.mean_ci95([10, 12, 14])
    half = 4.303 * 2 / math.sqrt(3)
    assert low == pytest.approx(12 - half) and high == pytest.approx(12 + half)
    assert all(math.isnan(v) for v in metrics.mean_ci95([5.0]))


def test_convergence_guard_non_finite():
    assert metrics.convergence_problem([2.0, float("nan"), 1.0]) == "loss is nan at measured step 1"
    assert "inf" in metrics.convergence_problem([2.0, 1.0, float("inf")])


def test_convergence_guard_trend_needs_enough_steps():
    flat = [1.0] * 12
    # first quarter (3 steps) mean 1.0, last quarter mean 1.0: not below -> diverged
    assert metrics.convergence_problem(flat).startswith("loss did not decrease: mean of the last 3 steps 1")
    assert metrics.convergence_problem(flat[:9]) is None  # too few steps to judge a trend
    falling = [3.0, 2.0, 2.5, 1.0, 1.5, 1.2, 1.1, 0.9, 1.0, 0.8, 0.7, 0.9]
    assert metrics.convergence_problem(falling) is None  # 2.5 -> 0.8: noisy but decreasing
    assert metrics.convergence_problem(falling[::-1]) is not None


def test_time_to_target_by_hand():
    curve = [(2, 0.5), (4, 0.91), (6, 0.95)]
    seconds = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert metrics.time_to_target(curve, seconds, 0.9) == (4, pytest.approx(1.0))
    assert metrics.time_to_target(curve, seconds, 0.95) == (6, pytest.approx(2.1))
    assert metrics.time_to_target(curve, seconds, 0.99) == (None, None)
