"""SparkNet (results/reference/sparknet-2016.toml) inside a real Spark cluster over a capped link: speed-up in
time to the target accuracy against tau.

Two network-namespace hosts (tools/netns_hosts.sh, prefix rosetta-sparknet) each run a Spark worker of one
task slot (the master and the driver in the first), pyspark's own JVMs (testbed.spark_cluster); every run's 2
ranks are one barrier stage, a rank behind each host's link, which the run's ``network`` caps (tc tbf on both
hosts' eth0). The reference's reduced run (torch_ddp, digits to 93%, batch 16 a worker) is run once per tau:
the first sweep holds allreduce (tau 1) and the first tau, each further sweep one more tau; then
``rosetta reproduce``'s report (its chart, the strategies' chart and the speed-up-against-tau chart) is written
over all of them into the results folder. Needs root (the namespaces, tc), Java 17+ and pyspark.

    .venv/bin/python benchmarks/sparknet_spark.py --results results/sparknet-spark --network 10mbit \\
        --taus 2,4,8,16 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.cli.console import print_items  # noqa: E402
from harness.experiment import scenario  # noqa: E402
from harness.launchers.hosts import namespace_hosts  # noqa: E402
from harness.reproduction import reference  # noqa: E402
from harness.reproduction.prediction import reproduction_report  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402
from testbed import spark_cluster  # noqa: E402

PREFIX = "rosetta-sparknet"  # its own namespaces: another session's rosetta-h* are left alone


def scenario_doc(ref, hosts: dict[str, str], master: str, tau: int, with_allreduce: bool, args) -> dict:
    """The reference's reduced run on the two hosts, local SGD at ``tau`` (and allreduce, when asked)."""
    doc = {k: dict(v) if isinstance(v, dict) else v for k, v in ref.reproduce.scenario.items()}
    doc["name"] = f"reproduce-{ref.id}-spark-{args.network}-tau{tau}"
    doc["settings"] = {**doc.get("settings", {}), "repeats": args.repeats, "measured_steps": args.measured_steps,
                       "device": "cpu", "timeout_s": args.timeout_s}
    doc["matrix"] = {**doc["matrix"], "launcher": "spark", "nodes": 2, "procs_per_node": 1,
                     "network": args.network,
                     "strategy": ["allreduce", "local_sgd"] if with_allreduce else ["local_sgd"]}
    doc["strategy_options"] = {"local_sgd": {"tau": tau}}
    names, addresses = list(hosts), list(hosts.values())
    doc["launcher_options"] = {"spark": {"master": master, "hosts": names, "driver_host": addresses[0],
                                         "slots_timeout_s": 60}}
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("results/sparknet-spark"))
    parser.add_argument("--network", default="10mbit", help="each host's link cap (tc's notation)")
    parser.add_argument("--taus", default="2,4,8,16", help="local SGD's taus beside allreduce (tau 1)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--measured-steps", type=int, default=400, help="enough for the largest tau to reach 93%%")
    parser.add_argument("--timeout-s", type=float, default=600)
    args = parser.parse_args()
    ref = reference.get("sparknet-2016")
    taus = [int(t) for t in args.taus.split(",") if t]
    sweeps, loads = [], []
    start = time.perf_counter()
    with namespace_hosts(2, prefix=PREFIX) as hosts:
        with spark_cluster.cluster([(("ip", "netns", "exec", name), address) for name, address in hosts.items()]) \
                as master:
            for index, tau in enumerate(taus):
                doc = scenario_doc(ref, hosts, master, tau, index == 0, args)
                rows = run_sweep(scenario.parse(doc, "sparknet_spark", doc["name"]), args.results)
                loads.append(os.getloadavg()[0])
                for row in rows:
                    print(f"tau {tau} {row['strategy']}: {row['status']} {row.get('reason') or ''} time to "
                          f"target {row.get('time_to_target_s')} s, {row.get('throughput')} samples/s", flush=True)
                sweeps.append(rows[0]["sweep_id"])
    print_items(reproduction_report(ref, args.results, ",".join(sweeps)))
    print(f"{time.perf_counter() - start:.0f} s in all; load (1 min) after each sweep: "
          + ", ".join(f"{x:.1f}" for x in loads))


if __name__ == "__main__":
    main()
