"""A network card's faults named by the attribution: on 4 real network-namespace hosts (one emulated GPU each,
ResNet-50 tiny's real gradients over the shaped 10GbE), a quarter-rate card and a link 2 ms longer slow every
rank's ring alike, so no rank's step tells; each host's first rank probes its link against every other host's
after the window (frameworks/shared/link_probe.py) and the row names the host with kind link."""

import json
from pathlib import Path

import pytest

from harness.experiment import scenario
from harness.running.collect import ATTRIBUTION_FILE
from harness.running.runner import run_sweep
from tests.helpers.emulated_scenarios import scenario_text

pytest.importorskip("torch")

EMULATION = 'dilation = 16\ncompute_s = 0.02\nstep_variation = "none"\ngradient_scale = 8'


@pytest.mark.parametrize("fault", [{"kind": "slow_nic", "rate_fraction": 0.25, "host": 2},
                                   {"kind": "long_link", "latency_s": 2e-3, "host": 1}])
def test_a_slow_or_long_link_is_named_by_its_host_with_kind_link(four_hosts, write_scenario, tmp_path, fault):
    text = scenario_text(nodes=4, procs=1, size="tiny", emulation=EMULATION, names=list(four_hosts),
                         addresses=list(four_hosts.values()), faults=fault)
    [row] = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row.get("reason")
    planted = list(four_hosts)[fault["host"]]
    assert (row["fault_kind"], row["fault_host"]) == (fault["kind"], planted)
    assert (row["attribution_kind"], row["attribution_host"], row["link_host"]) == ("link", planted, planted)
    assert row["link_score"] > 1.15 and row["slowest_link_s"] > row["median_link_s"] > 0
    links = json.loads((Path(row["run_dir"]) / ATTRIBUTION_FILE).read_text())["links"]
    assert [h["host"] for h in links] == list(four_hosts) and all(h["pairs"] == 3 for h in links)
