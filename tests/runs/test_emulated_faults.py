"""One fault of each kind planted on the emulated cluster ([faults]: harness/machines/faults.py), on 2 real
network-namespace hosts. The faults a rank's timers see (a slow GPU, an intermittent one, a CPU hog, a slow
loader) are each planted in a real 2-rank torch_ddp run with real gradients over the shaped links: the row
records the fault and its attribution names the rank or host and the phase. A network card's faults act on
the host's shaping, which a run's launcher applies before its ranks start: those commands are run for real on
the hosts and the card's rate and delay line read back (a run of them would slow every rank of a ring alike,
which the attribution does not claim to tell; benchmarks/attribution.py measures it)."""

import json
import subprocess
import sys

import pytest

from harness.experiment import matrix, scenario
from harness.launchers import hosts as host_list
from harness.machines import emulated_cluster
from harness.running.runner import run_sweep
from tests.helpers import REPO
from tests.helpers.emulated_scenarios import scenario_text

pytest.importorskip("torch")

K = 16
EMULATION = f'dilation = {K}\ncompute_s = 0.05\nstep_variation = "none"'
SIZES = {"slow_gpu": {"factor": 1.5, "rank": 1}, "intermittent": {"factor": 2.0, "every": 2, "rank": 0},
         "cpu_hog": {"factor": 1.5, "host": 1}, "slow_loader": {"factor": 1.5, "host": 0},
         "slow_nic": {"rate_fraction": 0.25, "host": 1}, "long_link": {"latency_s": 2e-3, "host": 0}}


def _text(two_hosts, kind: str | None) -> str:
    """2 hosts x 1 emulated GPU (ResNet-50 tiny's real gradients, 0.05 s of compute, exact steps), 4 measured
    steps, the fault of ``kind`` at its place in SIZES (none for None)."""
    text = scenario_text(nodes=2, procs=1, size="tiny", emulation=EMULATION, names=list(two_hosts),
                         addresses=list(two_hosts.values()), faults=kind and {"kind": kind, **SIZES[kind]})
    return text.replace("measured_steps = 2", "measured_steps = 4")


@pytest.mark.parametrize("kind, phase", [("slow_gpu", "compute"), ("intermittent", "compute"), ("cpu_hog", "rest"),
                                         ("slow_loader", "data")])
def test_a_fault_the_ranks_timers_see_is_named_by_its_place_and_phase(two_hosts, write_scenario, tmp_path, kind,
                                                                      phase):
    [row] = run_sweep(scenario.load(write_scenario(_text(two_hosts, kind))), tmp_path / "results")
    assert row["status"] == "ok", row.get("reason")
    place = SIZES[kind].get("rank", SIZES[kind].get("host"))  # one GPU a host: a rank is its host's index
    assert (row["fault_kind"], row["fault_host"]) == (kind, list(two_hosts)[place])
    assert (row["slowest_rank"], row["slowest_host"], row["attribution_phase"]) == (place, row["fault_host"], phase)
    assert row["straggler_score"] > 1.02  # of 2 ranks the median is their mean: half the fault's share


def _shape(two_hosts, write_scenario, kind: str) -> None:
    """The run's launcher's set-up (each host's shaping), run on the hosts as a launch runs it."""
    [spec] = matrix.expand(scenario.load(write_scenario(_text(two_hosts, kind))))
    for argv in host_list.shaping(spec, tuple(two_hosts), host_list.RemoteShell.NETNS, "eth0"):
        subprocess.run(list(argv), check=True, cwd=REPO, capture_output=True)


def _on(host: str, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", host, *argv], capture_output=True, text=True, cwd=REPO).stdout


def test_a_slow_network_card_caps_its_host_alone(two_hosts, write_scenario):
    _shape(two_hosts, write_scenario, "slow_nic")
    rates = [_on(host, "tc", "qdisc", "show", "dev", "eth0").split(" rate ")[1].split()[0] for host in two_hosts]
    assert rates[1] != rates[0], rates  # tc prints rounded units: 10GbE / 16 and a quarter of it


def test_a_long_link_holds_its_hosts_arriving_packets_longer(two_hosts, write_scenario):
    _shape(two_hosts, write_scenario, "long_link")
    ask = ("from harness.base import delay_line; "
           "print(open(f'/proc/{delay_line.running()}/cmdline').read().replace(chr(0), ' '))")
    lines = [_on(host, sys.executable, "-c", ask) for host in two_hosts]
    held = float(lines[0].split("eth0:")[1].split()[0])
    assert held == pytest.approx((emulated_cluster.link("10GbE").latency_s + 2e-3) * K), lines  # dilated by k
    assert "eth0:" not in lines[1]  # the other's 10GbE latency x k, under the delay line's least (1 ms): none


def test_compare_of_a_store_before_and_after_one_host_was_slowed_names_that_host(two_hosts, write_scenario,
                                                                                  tmp_path, capsys):
    """The user's question after an upgrade: the same configuration run on a healthy cluster and on one whose
    second host's GPU is 1.5x slow; compare's verdict says where (the host, its rank, compute) and the fault
    as a provenance difference."""
    from harness.cli import main as cli

    [before] = run_sweep(scenario.load(write_scenario(_text(two_hosts, None))), tmp_path / "before")
    [after] = run_sweep(scenario.load(write_scenario(_text(two_hosts, "slow_gpu"))), tmp_path / "after")
    assert before["status"] == after["status"] == "ok" and before["config_id"] == after["config_id"]
    cli.main(["compare", str(tmp_path / "before"), str(tmp_path / "after"), "--json", str(tmp_path / "v.json")])
    [cell] = json.loads((tmp_path / "v.json").read_text())["configurations"]
    slowed = list(two_hosts)[1]
    assert cell["where"].startswith(f"slowest: host {slowed} rank 1") and "its compute grew most" in cell["where"]
    assert "fault_kind: - -> slow_gpu" in cell["provenance"] and f"fault_host: - -> {slowed}" in cell["provenance"]
    assert f"host {slowed} rank 1" in capsys.readouterr().out
