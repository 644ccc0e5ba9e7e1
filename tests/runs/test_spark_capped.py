"""SparkNet's setting for real: a Spark standalone cluster whose two workers (one task slot each) run in two
network-namespace hosts (tools/netns_hosts.sh, prefix rosetta-sparktest), the master and the driver in the
first, and the run's ``network`` caps both hosts' links (tc tbf). One capped point, two strategies: allreduce
every step against parameter averaging every tau = 8 steps. Needs root (namespaces, tc), Java and pyspark."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from harness.experiment import scenario
from harness.launchers.hosts import namespace_hosts
from harness.launchers.spark import java_missing
from harness.running.runner import run_sweep

pytest.importorskip("pyspark", reason="pyspark not installed (pip install -e '.[engines]')")
pytest.importorskip("torch")
if java_missing():
    pytest.skip("Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)", allow_module_level=True)
if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
    pytest.skip("network-namespace hosts need root and iproute2 (ip, tc)", allow_module_level=True)

from testbed import spark_cluster  # noqa: E402
from testbed.servers import Unavailable  # noqa: E402

CAP = "10mbit"
RATE_BITS = 10e6
STEPS = 40


@pytest.fixture(scope="module")
def hosts_and_master():
    """({name: address} of the two hosts, the master's URL)."""
    with namespace_hosts(2, prefix="rosetta-sparktest") as hosts:
        try:
            with spark_cluster.cluster([(("ip", "netns", "exec", n), a) for n, a in hosts.items()]) as master:
                yield hosts, master
        except Unavailable as exc:
            pytest.skip(str(exc))


def test_a_capped_link_between_the_spark_workers_slows_allreduce_and_spares_local_sgd(hosts_and_master, tmp_path):
    hosts, master = hosts_and_master
    doc = {"name": "spark-capped",
           "settings": {"warmup_steps": 1, "measured_steps": STEPS, "repeats": 1, "timeout_s": 300, "device": "cpu"},
           "matrix": {"framework": "torch_ddp", "workload": "digits", "size": "small", "nodes": 2,
                      "procs_per_node": 1, "batch_per_worker": 16, "launcher": "spark", "network": CAP,
                      "strategy": ["allreduce", "local_sgd"]},
           "strategy_options": {"local_sgd": {"tau": 8}},
           "launcher_options": {"spark": {"master": master, "hosts": list(hosts),
                                          "driver_host": list(hosts.values())[0], "slots_timeout_s": 60}}}
    rows = {r["strategy"]: r for r in run_sweep(scenario.parse(doc, "test", "spark-capped"), tmp_path / "results")}
    for strategy, row in rows.items():
        assert row["status"] == "ok", f"{strategy}: {row['reason']}"
        assert row["network"] == CAP and row["weights_consistent"] is True
        assert sorted(json.loads(row["hosts"])) == sorted(hosts.values())  # a rank behind each host's link
        assert "spark_driver: 2 rank(s) ended with status 0" in (Path(row["run_dir"]) / "launcher.log").read_text()
    allreduce, local = rows["allreduce"], rows["local_sgd"]
    # the cap is real: every allreduce step moved its bytes through the 10 Mbit/s link
    step_s = json.loads(allreduce["step_times_s"])
    assert sorted(step_s)[len(step_s) // 2] >= 0.7 * allreduce["bytes_per_step"] * 8 / RATE_BITS, step_s
    assert local["bytes_per_step"] < allreduce["bytes_per_step"] / 4  # averaged every 8th step
    assert local["throughput"] > 1.5 * allreduce["throughput"], (local["throughput"], allreduce["throughput"])
    print(f"{CAP}: allreduce {allreduce['throughput']:.0f}, local SGD tau 8 {local['throughput']:.0f} samples/s",
          file=sys.stderr)
