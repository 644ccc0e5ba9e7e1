"""Launchers are pure functions: check exactly what would run."""

from pathlib import Path

from harness.contract.spec import RunSpec
from harness.launchers import LaunchRequest, get, unsupported_reason
from tests.helpers.launch import launch_request, run_spec

spec = run_spec


def test_torchrun_command():
    request = LaunchRequest(spec(), "frameworks.torch_ddp.worker", Path("/r/spec.json"), "/py/python", cpu_count=8)
    command = get("torchrun")(request)
    assert command.argv == ("/py/python", "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                            "--nproc-per-node", "2", "--no-python", "/py/python", "-m", "harness.contract.worker",
                            "frameworks.torch_ddp.worker", "/r/spec.json")
    assert command.env["OMP_NUM_THREADS"] == "4"  # 8 cores shared by 2 ranks


def test_threads_never_below_one():
    request = LaunchRequest(spec(procs_per_node=4), "m", Path("s"), "py", cpu_count=2)
    assert get("torchrun")(request).env["OMP_NUM_THREADS"] == "1"


def test_multi_node_needs_hosts():
    assert unsupported_reason("torchrun", spec(nodes=2)) == "2 nodes: set [launcher_options.torchrun] hosts"
    assert unsupported_reason("torchrun", spec(nodes=2, launcher_options={"hosts": ("a",)})) == (
        "2 nodes but [launcher_options.torchrun] hosts names 1")
    assert unsupported_reason("torchrun", spec()) is None


NETNS = {"hosts": ("rosetta-h0", "rosetta-h1"), "addresses": ("10.0.0.1", "10.0.0.2"), "remote": "netns"}


def _request(**kw):
    return launch_request(spec(**kw), worker_module="mod", spec_file=Path("/res/runs/S/0003/spec.json"), python="/py")


def test_torchrun_across_hosts_one_command_per_host_with_explicit_rendezvous():
    command = get("torchrun")(_request(nodes=2, procs_per_node=1, launcher_options=NETNS, network="1gbit"))
    first, (second,) = command.argv, command.also
    assert first[:4] == ("ip", "netns", "exec", "rosetta-h0") and second[:4] == ("ip", "netns", "exec", "rosetta-h1")
    assert first[4:7] == ("env", "-C", "/repo") and "ROSETTA_HOST=rosetta-h1" in second
    assert "OMP_NUM_THREADS=4" in first  # two namespace hosts share this machine's 8 cores
    for node, argv in enumerate((first, second)):
        tail = argv[argv.index("/py"):]
        assert tail[:6] == ("/py", "-m", "torch.distributed.run", "--nnodes", "2", "--rdzv-backend")
        assert argv[argv.index("--rdzv-endpoint") + 1] == "10.0.0.1:29400"
        assert argv[argv.index("--rdzv-conf") + 1] == f"is_host={'true' if node == 0 else 'false'}"
        assert argv[argv.index("--local-addr") + 1] == ("10.0.0.1", "10.0.0.2")[node]
        assert argv[-3:] == ("harness.contract.worker", "mod", "/res/runs/S/0003/spec.json")
    assert command.setup == tuple(
        ("ip", "netns", "exec", host, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "1gbit",
         "burst", "500000", "latency", "50ms") for host in ("rosetta-h0", "rosetta-h1"))


def test_mpirun_one_node_and_across_namespace_hosts():
    local = get("mpirun")(_request(launcher="mpirun"))
    assert local.argv[:6] == ("mpirun", "-np", "2", "--bind-to", "none", "--tag-output")
    assert local.argv[local.argv.index("plm") - 1: local.argv.index("plm") + 2] == ("--mca", "plm", "isolated")
    assert local.env["MASTER_ADDR"] == "127.0.0.1" and ("-x", "MASTER_PORT") == local.argv[
        local.argv.index("MASTER_PORT") - 1: local.argv.index("MASTER_PORT") + 1]
    # one host: a port free now, not a fixed 29500 that two runs on the machine would both bind
    assert local.env["MASTER_PORT"] != "29500" and 0 < int(local.env["MASTER_PORT"]) < 65536
    pinned = get("mpirun")(_request(launcher="mpirun", launcher_options={"master_port": 29999}))
    assert pinned.env["MASTER_PORT"] == "29999"
    multi = get("mpirun")(_request(nodes=2, procs_per_node=2, launcher="mpirun", launcher_options=NETNS))
    argv = multi.argv
    assert argv[:4] == ("ip", "netns", "exec", "rosetta-h0")  # mpirun runs in the first host
    assert argv[argv.index("--host") + 1] == "rosetta-h0:2,rosetta-h1:2"
    assert argv[argv.index("plm_rsh_agent") + 1] == "/repo/tools/netns_rsh.sh"
    assert argv[argv.index("rtc_hwloc_vmhole") + 1] == "none"  # daemons sharing a machine crashed without it
    assert "isolated" not in argv  # across hosts: the remote shell starts the daemons
    assert multi.env["MASTER_ADDR"] == "10.0.0.1" and multi.env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert multi.env["MASTER_PORT"] == "29500"  # across hosts: torch's default, as on a cluster
    assert argv[-5:] == ("/py", "-m", "harness.contract.worker", "mod", "/res/runs/S/0003/spec.json")


def test_network_caps_need_namespace_hosts():
    assert "network caps" in unsupported_reason("torchrun", spec(network="1gbit"))


def test_spec_json_round_trip():
    s = spec()
    assert RunSpec.from_json(s.to_json()) == s


def test_absent_namespace_hosts_are_named():
    options = {"hosts": ("rosetta-absent0", "rosetta-absent1"), "remote": "netns"}
    assert unsupported_reason("torchrun", spec(nodes=2, procs_per_node=1, launcher_options=options)) == (
        "no network namespace rosetta-absent0, rosetta-absent1 (start them: tools/netns_hosts.sh start 2)")


def test_horovodrun_gloo_or_mpi_controller():
    request = LaunchRequest(spec(launcher="horovodrun", nodes=2, procs_per_node=4,
                                 launcher_options={"hosts": ("n1", "n2"), "controller": "mpi",
                                                   "network_interface": "ib0"}),
                            "mod", Path("/r/spec.json"), "/py", cpu_count=8)
    assert get("horovodrun")(request).argv == (
        "/py", "-m", "harness.launchers.horovodrun.entry", "-np", "8", "-H", "n1:4,n2:4", "--mpi",
        "--start-timeout", "120", "--network-interface", "ib0",
        "/py", "-m", "harness.contract.worker", "mod", "/r/spec.json")
    local = get("horovodrun")(LaunchRequest(spec(launcher="horovodrun"), "mod", Path("/r/spec.json"), "/py", 8))
    assert local.argv[:8] == ("/py", "-m", "harness.launchers.horovodrun.entry", "-np", "2", "-H", "localhost:2",
                              "--gloo")
    assert "OMPI_MCA_plm" not in get("horovodrun")(request).env  # hosts: Horovod's mpirun uses ssh
    one_host_mpi = LaunchRequest(spec(launcher="horovodrun", launcher_options={"controller": "mpi"}), "mod",
                                 Path("/r/spec.json"), "/py", 8)
    assert get("horovodrun")(one_host_mpi).env["OMPI_MCA_plm"] == "isolated"


def test_horovodrun_reaches_namespace_hosts_through_the_netns_agent_from_the_first_host():
    hosts = {"hosts": ("rosetta-h0", "rosetta-h1"), "remote": "netns"}
    command = get("horovodrun")(_request(launcher="horovodrun", nodes=2, procs_per_node=2, launcher_options=hosts,
                                         network="1gbit"))
    assert command.argv[:4] == ("ip", "netns", "exec", "rosetta-h0")  # horovodrun and its rendezvous in host 0
    assert command.argv[7:9] == ("--remote-agent", "/repo/tools/netns_rsh.sh")  # in ssh's place
    assert command.argv[command.argv.index("--network-interface") + 1] == "eth0"
    assert command.env["OMP_NUM_THREADS"] == "2"  # 8 cores over 2 hosts of 2 ranks
    assert [argv[:4] for argv in command.setup] == [("ip", "netns", "exec", h) for h in hosts["hosts"]]
    with_mpi = spec(launcher="horovodrun", nodes=2, launcher_options={**hosts, "controller": "mpi"})
    assert "controller gloo only" in unsupported_reason("horovodrun", with_mpi)
    assert "shaped only between network-namespace hosts" in unsupported_reason(
        "horovodrun", spec(launcher="horovodrun", network="1gbit"))


def test_horovod_variables_become_torch_ones():
    from harness.contract.worker import torch_variables

    env = {"HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2"}
    assert torch_variables(env) == {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    assert torch_variables({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "RANK": "0"}) == {"WORLD_SIZE": "8"}


def test_horovodrun_build_check_is_asked_once_per_installation(tmp_path):
    from harness.launchers.horovodrun.entry import installation_key, remembered

    asked = []
    checks = {"gloo": lambda: asked.append("gloo") or True, "mpi": lambda: asked.append("mpi") or False}
    path = tmp_path / "cache" / "built.json"
    assert remembered(path, checks) == {"gloo": True, "mpi": False}
    assert remembered(path, checks) == {"gloo": True, "mpi": False}
    assert asked == ["gloo", "mpi"]  # the second launch read the file
    path.write_text("{not json")
    assert remembered(path, checks) == {"gloo": True, "mpi": False} and len(asked) == 4  # damaged: asked again

    package = tmp_path / "horovod"
    (package / "torch").mkdir(parents=True)
    ext = package / "torch" / "mpi_lib_v2.so"
    ext.write_bytes(b"1")
    before = installation_key(package, "0.28.1")
    ext.write_bytes(b"rebuilt")  # another size: a rebuilt Horovod is asked again
    assert installation_key(package, "0.28.1") != before
    assert installation_key(package, "0.28.2") != installation_key(package, "0.28.1")


def test_the_launchers_that_reach_namespace_hosts_say_so_in_their_declaration():
    from harness import launchers

    assert launchers.netns_launchers() == ("torchrun", "horovodrun", "mpirun")
    for name in launchers.netns_launchers():  # each takes the namespace hosts as its options
        assert {"hosts", "remote"} <= set(launchers.module(name).Options.__dataclass_fields__), name
