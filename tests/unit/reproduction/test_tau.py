"""SparkNet's curve from a results table: tau 1 is allreduce, speed-up is allreduce's time to target over
each tau's, per link; a run that never reached the target has no speed-up."""

import json
import math

import pandas as pd

from harness.reproduction import tau


def _row(strategy, tau_value, time_s, network="10mbit", repeat=0, status="ok", steps=100):
    options = json.dumps({"tau": tau_value} if strategy == "local_sgd" else {})
    return {"sweep_id": f"s-{network}-{tau_value}", "config_id": f"{strategy}-{tau_value}-{network}", "repeat": repeat,
            "timestamp": f"2026-12-03T10:00:0{repeat}", "status": status, "strategy": strategy,
            "strategy_options": options, "world_size": 2, "network": network, "time_to_target_s": time_s,
            "steps_to_target": steps if time_s == time_s else math.nan, "throughput": 100.0, "bytes_per_step": 1e4}


def test_speedup_against_tau_per_link_with_medians_over_repeats():
    table = pd.DataFrame([_row("allreduce", 1, 8.0), _row("allreduce", 1, 12.0, repeat=1),
                          _row("local_sgd", 4, 2.0), _row("local_sgd", 4, 3.0, repeat=1),
                          _row("local_sgd", 16, math.nan),  # never reached the target
                          _row("allreduce", 1, 1.0, network="unlimited"), _row("local_sgd", 4, 2.0, network="unlimited"),
                          _row("local_sgd", 8, 0.5, status="failed")])
    frame = tau.points(table).set_index(["network", "tau"])
    assert frame.loc[("10mbit", 1), "speedup"] == 1.0
    assert frame.loc[("10mbit", 4), "speedup"] == 10.0 / 2.5  # medians: 10 s over 2.5 s
    assert frame.loc[("10mbit", 16), "reached"] == 0 and math.isnan(frame.loc[("10mbit", 16), "speedup"])
    assert frame.loc[("unlimited", 4), "speedup"] == 0.5  # averaging less often need not pay on a fast link
    assert ("10mbit", 8) not in frame.index  # a failed run is no point
    assert tau.sweeps_tau(tau.points(table))
    text = tau.lines(tau.points(table))
    assert text[0].startswith("Speed-up in time to target over allreduce (tau 1) on a 10mbit link, 2 workers: "
                              "tau 1: 1.00x (10.00 s, 100 steps), tau 4: 4.00x (2.50 s, 100 steps), "
                              "tau 16: never reached the target")


def test_one_strategy_alone_is_no_curve(tmp_path):
    only = tau.points(pd.DataFrame([_row("local_sgd", 4, 2.0), _row("local_sgd", 8, 2.0)]))
    assert not tau.sweeps_tau(only) and only["speedup"].isna().all()
    assert tau.points(pd.DataFrame([_row("allreduce", 1, 1.0, status="failed")])).empty
    chart = tau.plot(tau.points(pd.DataFrame([_row("allreduce", 1, 8.0), _row("local_sgd", 4, 2.0)])),
                     tmp_path / "tau.png")
    assert chart.stat().st_size > 0
