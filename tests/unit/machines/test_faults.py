"""Faults planted on the emulated cluster ([faults]: harness/machines/faults.py): the table is checked as every
configuration is, its place is drawn from its seed, and each hook changes only the rank or host it is on."""

import pytest

from frameworks.shared.emulated_clock import InputClock, LayerClock, StepFactors
from harness.base.errors import UserError
from harness.contract.events import RankRecord
from harness.experiment import matrix, scenario
from harness.machines import emulated_cluster, faults
from harness.machines.faults import FaultKind, FaultOptions
from tests.helpers.emulated_scenarios import fault_table, scenario_text
from tests.helpers.scenarios import tiny_scenario


def _emulation(write_scenario, nodes=4, procs=4, **fault):
    text = scenario_text(nodes=nodes, procs=procs, faults=fault, emulation='dilation = 8\nstep_variation = "none"')
    [spec] = matrix.expand(scenario.load(write_scenario(text)))
    return spec.emulation


def test_the_table_is_a_frozen_dataclass_with_a_closed_kind_and_unknown_keys_refused(write_scenario):
    emulation = _emulation(write_scenario, kind="slow_gpu", factor=1.2, seed=3)
    fault = emulation["fault"]
    assert (fault["kind"], fault["factor"], fault["seed"], fault["procs_per_node"]) == ("slow_gpu", 1.2, 3, 4)
    assert fault["host"] == fault["rank"] // 4
    with pytest.raises(UserError, match=r"faults.*kind.*must be one of slow_gpu, slow_nic"):
        _emulation(write_scenario, kind="slow_disk")
    with pytest.raises(UserError, match=r"faults.*sped"):
        _emulation(write_scenario, kind="slow_gpu", sped=2)
    with pytest.raises(UserError, match=r"factor.*>= 1.0"):
        _emulation(write_scenario, kind="slow_gpu", factor=0.5)
    with pytest.raises(UserError, match=r"host 4 is not one of the run's 4 hosts"):
        _emulation(write_scenario, kind="cpu_hog", host=4)
    with pytest.raises(AttributeError):
        FaultOptions(FaultKind.SLOW_GPU).factor = 2.0  # frozen


def test_a_fault_needs_the_emulated_cluster_and_a_network_fault_two_hosts(write_scenario):
    with pytest.raises(UserError, match=r"only on the emulated cluster"):
        scenario.load(write_scenario(tiny_scenario(extra=fault_table({"kind": "slow_gpu"}))))
    with pytest.raises(UserError, match=r"needs 2 hosts"):
        _emulation(write_scenario, nodes=1, kind="slow_nic")


def test_placement_is_seeded_spread_over_every_rank_and_host_and_can_be_given():
    ranks = [faults.place(FaultOptions(FaultKind.SLOW_GPU, seed=s), 4, 4)["rank"] for s in range(200)]
    assert ranks == [faults.place(FaultOptions(FaultKind.SLOW_GPU, seed=s), 4, 4)["rank"] for s in range(200)]
    assert set(ranks) == set(range(16))
    hosts = [faults.place(FaultOptions(FaultKind.SLOW_NIC, seed=s), 4, 4) for s in range(100)]
    assert {h["host"] for h in hosts} == {0, 1, 2, 3} and all(h["rank"] is None for h in hosts)
    given = faults.place(FaultOptions(FaultKind.INTERMITTENT, rank=6), 4, 4)
    assert (given["rank"], given["host"]) == (6, 1)


def test_compute_faults_slow_one_rank_and_intermittent_every_nth_step_only():
    emulation = {"fault": faults.place(FaultOptions(FaultKind.INTERMITTENT, rank=5, factor=1.5, every=3), 4, 4)}
    assert [faults.compute_factor(emulation, 5, s) for s in range(6)] == [1, 1, 1.5, 1, 1, 1.5]
    assert all(faults.compute_factor(emulation, 4, s) == 1 for s in range(6))
    slow = {"fault": faults.place(FaultOptions(FaultKind.SLOW_GPU, rank=2, factor=1.3), 4, 4)}
    drawn = StepFactors(slow, seed=0, rank=2)
    assert [drawn.draw() for _ in range(3)] == [1.3] * 3 and StepFactors(slow, 0, 3).draw() == 1.0


def test_a_cpu_hog_and_a_slow_loader_act_on_their_hosts_ranks_only():
    base = {"compute_s": 0.1, "dilation": 8.0, "update_share": 0.0}
    hog = {**base, "fault": faults.place(FaultOptions(FaultKind.CPU_HOG, host=1, factor=1.25), 4, 4)}
    assert [faults.host_delay_s(hog, r) for r in (3, 4, 7, 8)] == [0.0, pytest.approx(0.2), pytest.approx(0.2), 0.0]
    assert LayerClock([1.0], hog, StepFactors(hog, 0, 5)).host_delay_s == pytest.approx(0.2)
    loader = {**base, "fault": faults.place(FaultOptions(FaultKind.SLOW_LOADER, host=2, factor=1.4), 4, 4)}
    clock = InputClock.of(loader, 9)
    assert (clock.workers, clock.batch_s) == (1, pytest.approx(1.4 * 0.1 * 8))
    assert InputClock.of(loader, 7) is None  # host 1: no loader, as without a fault
    own = {**loader, "input_workers": 4, "input_batch_s": 0.05}  # the scenario's own loader: its batches slower
    assert InputClock.of(own, 8).batch_s == pytest.approx(0.05 * 1.4 * 8) and InputClock.of(own, 0).batch_s == 0.4


def test_network_faults_change_one_hosts_card_in_its_shaping():
    link = emulated_cluster.Link("10GbE", 1.25e9, 5e-6)
    nic = {"fault": faults.place(FaultOptions(FaultKind.SLOW_NIC, host=3, rate_fraction=0.5), 4, 4)}
    assert faults.link(nic, 3, link).bandwidth_Bps == 0.625e9 and faults.link(nic, 2, link) == link
    far = {"fault": faults.place(FaultOptions(FaultKind.LONG_LINK, host=0, latency_s=1e-3), 4, 4)}
    assert faults.link(far, 0, link).latency_s == pytest.approx(1.005e-3)
    emulation = {"dilation": 8.0, "inter_link": "10GbE", "intra_link": "", **nic}
    rates = [emulated_cluster.shaping(emulation, (), "eth0", 4, 4, "python", host=h)[0] for h in (2, 3)]
    assert rates[1][rates[1].index("rate") + 1] != rates[0][rates[0].index("rate") + 1]


def test_the_row_names_the_planted_fault_and_its_hosts_name():
    fault = faults.place(FaultOptions(FaultKind.SLOW_NIC, host=1, rate_fraction=0.25, seed=9), 2, 2)
    ranks = [RankRecord(r, hello={"host": f"h{r // 2}"}, emulation={"fault": fault}) for r in range(4)]
    assert faults.fault_fields(ranks) == {"fault_kind": "slow_nic", "fault_rank": None, "fault_host": "h1",
                                          "fault_severity": 0.25, "fault_every": None, "fault_seed": 9}
    assert faults.fault_fields([RankRecord(0, emulation={})]) == {}
