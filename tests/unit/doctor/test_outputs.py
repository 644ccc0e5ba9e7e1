"""The doctor's store (baselines from earlier checks), its outputs (JSON, JUnit, Markdown), exit statuses, and
the pure parts of its probes: no process starts."""

import json
import xml.etree.ElementTree as ET

from harness.cli.main import main
from harness.doctor import check, judge, probes, report, store
from harness.doctor.judge import Measurement, Probe


def verdicts(*rates):
    return judge.judge([Measurement(Probe.EGRESS, f"h{i}", r, "broadcast") for i, r in enumerate(rates)])


def done(found, failures=()):
    return check.Report("doctor-1", "emulated v100 x1 over 10GbE", tuple(v.measurement.subject for v in found), 16.0,
                        tuple(found), None, tuple(failures))


FACTS = {"host": "here", "harness_commit": "abc"}


def test_earlier_healthy_checks_of_the_same_machine_type_are_the_baseline(tmp_path):
    store.append(tmp_path, store.rows("c1", "type-a", verdicts(1.0, 1.1, 0.2), 1.0, FACTS))
    store.append(tmp_path, store.rows("c2", "type-b", verdicts(5.0, 5.0), 1.0, FACTS))
    table = store.load(tmp_path)
    assert set(table["schema_version"]) == {store.DOCTOR_SCHEMA_VERSION}
    assert store.baselines(table, "type-a") == {Probe.EGRESS: [1.0, 1.1]}  # the bad 0.2 is no baseline
    assert store.baselines(table, "type-c") == {}


def test_a_bad_card_exits_1_and_every_output_names_it():
    found = done(verdicts(1.0, 0.25))
    assert found.exit_status == check.FOUND
    assert report.headline(found).startswith("host h1's network card (sending) is slow: 0.25 GB/s against 1 GB/s")
    doc = json.loads(report.json_text(found))
    assert (doc["format"], doc["findings"][0]["subject"], doc["exit_status"]) == (report.REPORT_FORMAT, "h1", 1)
    suite = ET.fromstring(report.junit_xml(found))
    [failure] = suite.iter("failure")
    assert failure.get("message") == "host h1's network card (sending) is slow"
    assert "**bad**" in report.markdown(found).splitlines()[6]  # the bad one first


def test_a_healthy_check_exits_0_and_a_failed_probe_1():
    assert done(verdicts(1.0, 0.95)).exit_status == check.HEALTHY
    failed = done(verdicts(1.0, 0.95), failures=["h0+h1: failed: launcher exit code 1"])
    assert failed.exit_status == check.FOUND and report.headline(failed).startswith("probes failed: h0+h1")
    assert len(list(ET.fromstring(report.junit_xml(failed)).iter("failure"))) == 1


def test_a_gpu_alone_keeps_its_own_fault_and_its_hosts_but_not_another_or_a_cards():
    slow = {"kind": "slow_gpu", "rank": 5, "host": 1, "procs_per_node": 4, "factor": 1.2}
    emulation = {"dilation": 16.0, "fault": slow}
    assert probes.one_gpu(emulation, 1, 1, 4)["fault"] == {**slow, "rank": 0, "host": 0, "procs_per_node": 1}
    assert "fault" not in probes.one_gpu(emulation, 1, 2, 4) and "fault" not in probes.one_gpu(emulation, 0, 1, 4)
    hog = {"kind": "cpu_hog", "rank": None, "host": 1, "procs_per_node": 4, "factor": 1.5}
    assert probes.one_gpu({"fault": hog}, 1, 3, 4)["fault"]["host"] == 0
    nic = {"kind": "slow_nic", "rank": None, "host": 1, "procs_per_node": 4, "rate_fraction": 0.5}
    assert "fault" not in probes.one_gpu({"fault": nic}, 1, 0, 4)


def test_torchrun_ranks_follow_the_hosts_addresses():
    addresses = {"a": "10.0.0.2", "b": "10.0.0.1"}
    assert probes.rank_order(("a", "b"), addresses) == ("b", "a")


def test_bad_input_exits_2_in_one_line(capsys, tmp_path):
    assert main(["doctor"]) == 2
    assert main(["doctor", "h0", "--remote", "netns", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "rosetta: error: doctor: give HOSTS or --scenario (one of them)"
    assert err[1].startswith("rosetta: error: doctor: needs 2 or more distinct hosts")


def test_a_comm_launch_says_which_rank_broadcasts():
    from harness.contract.axes import Backend, Collective
    from harness.contract.spec import CommSpec

    spec = CommSpec(Backend.GLOO, "cpu", 2, 1, (Collective.BROADCAST,), (4,), (1,), 0, 60.0, root=1)
    assert CommSpec.from_json(spec.to_json()).root == 1
    assert CommSpec.from_json({k: v for k, v in spec.to_json().items() if k != "root"}).root == 0  # written before
