"""remote = "srun": a launch's hosts reached as steps of the SLURM job the harness runs in (rosetta doctor under
SLURM): torchrun's agent on each node through ``srun --nodelist``, nothing shaped, refused outside a job and
by the launchers that do not start one agent a host; the doctor's hosts from the job, or a one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.base.errors import UserError
from harness.cli.main import main
from harness.launchers import get, hosts, unsupported_reason
from tests.helpers.launch import launch_request, run_spec

SRUN = {"hosts": ("n1", "n2"), "addresses": ("10.1.0.1", "10.1.0.2"), "remote": "srun", "interface": "ib0"}


def test_torchrun_starts_one_agent_a_node_as_a_job_step(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    spec = run_spec(nodes=2, procs_per_node=4, launcher_options=SRUN)
    command = get("torchrun")(launch_request(spec, worker_module="mod", spec_file=Path("/res/spec.json"), python="/py"))
    for node, argv in enumerate((command.argv, *command.also)):
        assert argv[:6] == ("srun", "--nodes=1", "--ntasks=1", f"--nodelist=n{node + 1}", "--overlap",
                            "--kill-on-bad-exit=1")
        assert argv[6:9] == ("env", "-C", "/repo") and f"ROSETTA_HOST=n{node + 1}" in argv
        assert argv[argv.index("--local-addr") + 1] == SRUN["addresses"][node] and "GLOO_SOCKET_IFNAME=ib0" in argv
    assert command.setup == ()  # a SLURM node's card is not this machine's to shape
    assert unsupported_reason("torchrun", spec) is None


def test_srun_is_refused_outside_a_job_and_by_launchers_without_an_agent_a_host(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    spec = run_spec(nodes=2, procs_per_node=1, launcher_options=SRUN)
    assert "not inside a SLURM job" in unsupported_reason("torchrun", spec)
    with pytest.raises(UserError, match="not inside a SLURM job"):
        hosts.job_nodes()
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    mpi = run_spec(launcher="mpirun", nodes=2, procs_per_node=1, launcher_options=SRUN)
    assert "use the slurm launcher" in (unsupported_reason("mpirun", mpi) or "")
    horovod = run_spec(launcher="horovodrun", nodes=2, procs_per_node=1,
                       launcher_options={"hosts": ("n1", "n2"), "remote": "srun"})
    assert "use the slurm launcher" in (unsupported_reason("horovodrun", horovod) or "")


def test_a_node_address_is_read_from_scontrol_s_line():
    line = "NodeName=rosetta-n2 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.213.7.2 NodeHostName=vm Port=6820"
    assert hosts._node_address(line) == ("rosetta-n2", "10.213.7.2")
    assert hosts._node_address("NodeName=a State=IDLE") == ("a", "a")  # no NodeAddr: the name is the address


def test_the_doctor_without_hosts_outside_a_job_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert main(["doctor", "--remote", "srun", "--results", str(tmp_path)]) == 2
    assert "not inside a SLURM job" in capsys.readouterr().err
    assert main(["doctor", "--results", str(tmp_path)]) == 2  # no HOSTS and not srun: as before
