"""Honest spread with few repeats: the observed range below 3 repeats, and no throughput interval
below zero anywhere (the summary, its table, its charts)."""

import math

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from harness.reports import aggregate, charts, notebook, terminal
from harness.results import metrics

positive = st.floats(min_value=1e-3, max_value=1e7, allow_nan=False, allow_infinity=False)


@given(st.lists(positive, min_size=1, max_size=12))
@settings(max_examples=300, deadline=None)
def test_no_interval_below_zero_for_positive_samples(values):
    low, high, kind = metrics.throughput_interval(values)
    if len(values) < 2:
        assert math.isnan(low) and kind == ""
        return
    assert 0 < low <= high
    if len(values) < metrics.MIN_REPEATS_FOR_CI:
        assert (low, high, kind) == (min(values), max(values), metrics.RANGE)
    else:
        assert kind == metrics.CI95_LOG
        geometric = math.exp(sum(math.log(v) for v in values) / len(values))
        assert low <= geometric * (1 + 1e-9) and geometric <= high * (1 + 1e-9)


def test_two_repeats_show_their_range_not_a_t_interval():
    # the quickstart's tf_mwms case: a t interval of 2 values multiplies the spread by 12.7 and went below 0
    values = [28.0, 35.0]
    assert metrics.mean_ci95(values)[0] < 0  # what used to be printed
    assert metrics.throughput_interval(values) == (28.0, 35.0, metrics.RANGE)
    assert metrics.interval_text(28.0, 35.0, metrics.RANGE, 2) == "28.0-35.0 (range of 2)"


def test_three_repeats_give_the_geometric_interval_by_hand():
    low, high, kind = metrics.throughput_interval([10.0, 12.0, 14.0])
    logs = [math.log(v) for v in (10.0, 12.0, 14.0)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    assert low == pytest.approx(math.exp(mean - 4.303 * sd / math.sqrt(3)))
    assert high == pytest.approx(math.exp(mean + 4.303 * sd / math.sqrt(3)))
    assert kind == metrics.CI95_LOG


def _table(throughputs: list[float], world: int = 1) -> pd.DataFrame:
    rows = []
    for i, tp in enumerate(throughputs):
        rows.append({"sweep_id": "s", "config_id": f"c{world}", "repeat": i, "timestamp": f"2026-01-0{i + 1}",
                     "scenario": "x", "framework": "tf_mwms", "workload": "resnet50", "size": "small",
                     "strategy": "allreduce", "storage": "synthetic", "launcher": "mpirun", "network": "unlimited",
                     "precision": "fp32", "memory_format": "contiguous", "compile": "off", "batch_per_worker": 8,
                     "device": "cpu", "device_requested": "auto", "sample_unit": "images", "nodes": 1,
                     "procs_per_node": world, "world_size": world, "status": "ok", "reason": None,
                     "throughput": tp, "step_times_s": "[0.1, 0.1]", "weights_consistent": True,
                     "bytes_per_step": math.nan, "compression_ratio": math.nan, "target_accuracy": math.nan,
                     "accuracy_curve": None, "steps_to_target": math.nan, "time_to_target_s": math.nan,
                     "final_accuracy": math.nan})
    return pd.DataFrame(rows)


def test_the_table_says_what_its_interval_is_and_the_chart_has_no_bar_below_zero(tmp_path):
    from rich.console import Console

    summary = aggregate.summarize(pd.concat([_table([1.5, 62.0]), _table([40.0, 50.0, 61.0], world=2)]))
    assert (summary["interval_low"] > 0).all()
    console = Console(record=True, width=250)
    terminal.print_table(summary, console)
    text = console.export_text()
    assert "spread" in text and "min-max" in text and "range of 2" in text and "-0." not in text
    shown = notebook.display_table(summary)
    assert shown["spread"].iloc[0] == "1.5-62.0 (range of 2)"
    for i in range(len(summary)):
        below, _ = charts.error_bars(summary["throughput_median"].iloc[[i]], summary.iloc[[i]])
        assert summary["throughput_median"].iloc[i] - below.iloc[0] > 0
    assert charts.plot(summary, tmp_path / "c.png").exists()
    assert charts.plot_bars(summary, tmp_path / "b.png").exists()
