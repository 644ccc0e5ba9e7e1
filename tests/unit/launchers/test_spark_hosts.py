"""The spark launcher over network-namespace hosts: the driver in the first host, the ranks' sockets on
the hosts' link, the run's network cap set on every used host's link before the stage starts."""

import json
from pathlib import Path

from harness.launchers import get, unsupported_reason
from tests.helpers.launch import launch_request, run_spec

HOSTS = {"hosts": ("rosetta-h0", "rosetta-h1"), "driver_host": "10.213.8.1"}


def test_the_driver_runs_in_the_first_host_and_the_cap_shapes_every_used_host():
    spec = run_spec(launcher="spark", nodes=2, procs_per_node=1, launcher_options=HOSTS, network="100mbit")
    command = get("spark")(launch_request(spec, worker_module="mod", spec_file=Path("/r/spec.json"), python="/py"))
    assert command.argv[:4] == ("ip", "netns", "exec", "rosetta-h0")
    assert command.argv[4:] == ("/py", "-m", "harness.launchers.spark.driver", "/py", "mod", "/r/spec.json")
    rank_env = json.loads(command.env["ROSETTA_SPARK_RANK_ENV"])
    assert rank_env["GLOO_SOCKET_IFNAME"] == "eth0"  # gloo on the capped link, not on loopback
    assert command.setup == tuple(
        ("ip", "netns", "exec", host, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "100mbit",
         "burst", "65536", "latency", "50ms") for host in ("rosetta-h0", "rosetta-h1"))


def test_without_hosts_nothing_is_shaped_and_the_driver_runs_here():
    command = get("spark")(launch_request(run_spec(launcher="spark"), python="/py"))
    assert command.argv[0] == "/py" and command.setup == ()
    assert "GLOO_SOCKET_IFNAME" not in json.loads(command.env["ROSETTA_SPARK_RANK_ENV"])


def test_a_cap_needs_namespace_hosts_that_exist_and_two_nodes():
    capped = {"launcher": "spark", "nodes": 2, "procs_per_node": 1, "network": "100mbit"}
    assert unsupported_reason("spark", run_spec(**capped)) == "2 nodes: set [launcher_options.spark] hosts"
    assert "network caps are applied only between network-namespace hosts" in unsupported_reason(
        "spark", run_spec(**{**capped, "nodes": 1}))
    absent = {"hosts": ("rosetta-absent0", "rosetta-absent1")}
    assert unsupported_reason("spark", run_spec(**capped, launcher_options=absent)) == (
        "no network namespace rosetta-absent0, rosetta-absent1 (start them: tools/netns_hosts.sh start 2)")
    assert unsupported_reason("spark", run_spec(**{**capped, "nodes": 1, "procs_per_node": 2},
                                                launcher_options={"hosts": ("rosetta-absent0",)})).startswith(
        "no network namespace rosetta-absent0")
