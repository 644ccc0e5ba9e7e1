"""``reproduce --at emulated`` checks root, ip, tc, iptables and the largest point's memory before its first point,
asked through injected probes (no process starts), and says in one line what is missing and what installs it."""

from __future__ import annotations

import pytest

from harness.launchers import hosts
from harness.reproduction import emulated_plan
from harness.reproduction import prerequisites
from harness.reproduction import reference
from tests.helpers import REPO

REF = reference.get("batchai-torch-v100")  # 5 points, up to 32 GPUs in 8 hosts
PLENTY = 10**13


def probes(root=True, absent=(), available=PLENTY):
    return prerequisites.Probes(is_root=lambda: root, which=lambda tool: None if tool in absent else f"/usr/sbin/{tool}",
                                available_bytes=lambda: available)


def test_a_ready_machine_is_ready():
    check = prerequisites.check(REF, probes())
    assert check.ok and check.line() == "--at emulated: prerequisites here (root, ip, tc, iptables)"


def test_a_quickstart_only_machine_is_told_what_to_install_in_one_line():
    check = prerequisites.check(REF, probes(absent=("iptables", "tc")))
    line = check.line()
    assert not check.ok and "\n" not in line
    assert "tc (each link's rate (tbf), package iproute2)" in line and "iptables (" in line
    assert "apt-get install -y --no-install-recommends iproute2 iptables" in line
    assert prerequisites.INSTALLER in line and "root" not in line.split(":")[1]


def test_without_root_it_says_so_and_how():
    line = prerequisites.check(REF, probes(root=False)).line()
    assert line.startswith("--at emulated: missing root (network namespaces)") and "sudo" in line
    assert "apt-get" not in line  # nothing to install


def test_too_little_memory_is_said_but_does_not_stop_the_run():
    rank = emulated_plan.rank_bytes(REF)
    available = int(10.5 * rank / emulated_plan.MEMORY_SHARE)  # 10 ranks fit
    check = prerequisites.check(REF, probes(available=available))
    assert check.ok
    assert f"the largest point (32 GPUs) needs {32 * rank / 1e9:.1f} GB" in check.line()
    assert "points above 10 GPUs will be skipped" in check.line()
    assert prerequisites.check(REF, probes(available=int(32 * rank / emulated_plan.MEMORY_SHARE) + 1)).memory == ""


def test_a_largest_point_beyond_memory_runs_reduced_where_its_framework_can():
    ref = reference.get("dlperf-rn50-4x8")  # torch_ddp's 32 GPUs in 4 hosts of 8
    rank = emulated_plan.rank_bytes(ref, 1, "torch_ddp")
    line = prerequisites.check(ref, probes(available=int(10.5 * rank / emulated_plan.MEMORY_SHARE))).line()
    assert "the largest point (32 GPUs) needs" in line
    assert "it runs reduced, 4 processes of 8 GPUs, gradients at 1/32" in line and "skipped" not in line


def test_the_packages_named_are_the_ones_the_installer_installs():
    listed = {line.strip() for line in (REPO / "tools" / "system-packages.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    assert {package for package, _ in prerequisites.TOOLS.values()} <= listed
    assert (REPO / prerequisites.INSTALLER).exists()


@pytest.mark.parametrize("count", [1, 3])
def test_planned_hosts_are_named_as_the_script_names_them(count):
    script = hosts.NETNS_SCRIPT.read_text()
    assert 'PREFIX=${ROSETTA_NETNS_PREFIX:-rosetta}-h' in script and 'ns="$PREFIX$i"' in script
    assert 'addr add "10.213.8.$((i + 1))/24"' in script
    planned = hosts.planned_hosts(count, "p")
    assert list(planned) == [f"p-h{i}" for i in range(count)] and planned["p-h0"] == "10.213.8.1"


def test_the_verb_stops_before_making_any_host(monkeypatch, capsys):
    from harness.cli import main as cli

    real = prerequisites.check
    monkeypatch.setattr(prerequisites, "check", lambda ref: real(ref, probes(absent=("iptables",))))
    monkeypatch.setattr(hosts, "namespace_hosts", lambda *a, **k: pytest.fail("made hosts before the check"))
    assert cli.main(["reproduce", "batchai-torch-v100", "--at", "emulated"]) == 2
    assert "missing iptables" in capsys.readouterr().err


def test_the_plan_of_an_emulated_cluster_scenario_says_what_is_missing(monkeypatch, capsys):
    from harness.cli import main as cli

    real = prerequisites.check
    monkeypatch.setattr(prerequisites, "check", lambda ref: real(ref, probes(root=False, absent=("tc", "ip"))))
    assert cli.main(["plan", str(REPO / "scenarios" / "emulated_cluster.toml")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert "the emulated cluster: missing root (network namespaces), ip (" in out and "apt-get install -y" in out
    assert cli.main(["plan", str(REPO / "scenarios" / "quickstart.toml")]) == 0
    assert "the emulated cluster" not in capsys.readouterr().out  # no emulated links, nothing asked
