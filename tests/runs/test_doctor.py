"""``rosetta doctor`` on 2 real network-namespace hosts of the emulated cluster, one host's network card planted
at a quarter of its rate ([faults] slow_nic, harness/machines/faults.py): the doctor shapes the hosts as the
scenario's runs would, probes each card both ways through ``rosetta comm``'s worker and names that host's card
first, with its figure against the other's (the median of this check: the store is empty), and exits 1."""

import json

import pytest

from harness.cli.main import main
from harness.doctor import store
from tests.helpers.emulated_scenarios import scenario_text

pytest.importorskip("torch")

SLOW = 1  # the host whose card is slowed
EMULATION = 'dilation = 16\ncompute_s = 0.05\nstep_variation = "none"'


def test_a_quarter_rate_network_card_is_named(two_hosts, write_scenario, tmp_path):
    names = list(two_hosts)
    text = scenario_text(nodes=2, procs=1, size="tiny", emulation=EMULATION, names=names,
                         addresses=list(two_hosts.values()),
                         faults={"kind": "slow_nic", "rate_fraction": 0.25, "host": SLOW})
    out = tmp_path / "doctor.json"
    status = main(["doctor", "--scenario", str(write_scenario(text)), "--no-compute", "--bytes", "2M", "--results",
                   str(tmp_path / "results"), "--json", str(out)])
    doc = json.loads(out.read_text())
    assert status == 1, doc["headline"]
    first = doc["findings"][0]
    assert (first["probe"], first["subject"], first["reference"]) == ("egress", names[SLOW], "median"), doc["headline"]
    egress = {m["subject"]: m["value"] for m in doc["measurements"] if m["probe"] == "egress"}
    assert egress[names[SLOW]] < 0.5 * egress[names[1 - SLOW]], egress  # a quarter, read through TCP and gloo
    assert not any(f["subject"] == names[1 - SLOW] for f in doc["findings"])  # the healthy host is not named
    assert set(store.load(tmp_path / "results")["check_id"]) == {doc["check_id"]}  # the next check's baseline
