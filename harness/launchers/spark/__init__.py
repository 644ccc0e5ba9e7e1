"""Spark: a run's ranks as one barrier stage on a Spark standalone cluster (SparkNet's setting).

``python -m harness.launchers.spark.driver RANK_PYTHON MODULE SPEC`` (beside this module) starts a
SparkContext on ``master``, makes an RDD of ``world_size`` partitions and runs
``rdd.barrier().mapPartitions``: Spark schedules every task of a barrier stage at once or none, and
fails (and kills) them all when one fails. Each task reads its rendezvous from pyspark's
``BarrierTaskContext`` (its partition among ``getTaskInfos()``, the executors' addresses, and a free
port from each through ``allGather``) and starts the framework's worker
(``python -m harness.contract.worker MODULE SPEC``) as a child process with torch.distributed's
variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...). A rank that exits non-zero
fails its task, hence the stage and the run. The ranks write their records into the run's folder,
so the executors must see it (one machine, or shared storage at the same path).

With ``hosts`` (network-namespace hosts, ``tools/netns_hosts.sh``, whose Spark workers the cluster's
owner started inside them), the driver runs in the first host's namespace (a cluster's edge node), each
rank's gloo sockets use the hosts' ``interface``, and the run's ``network`` caps every used host's link
(``tc`` ``tbf``, as torchrun's namespace hosts): SparkNet's setting of a slow network between workers.

pyspark (the ``engines`` extra) and Java (17+, on PATH or JAVA_HOME) are needed only where a run
launches: this module imports neither.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import dataclass, field

from harness.contract.spec import RunSpec
from harness.launchers import LaunchCommand, LaunchRequest, hosts as host_list, options, worker_argv, worker_env
from harness.launchers.hosts import RemoteShell

CLUSTER = True  # runs on a scheduler's nodes: `reproduce --at published` sets no limit from this machine
RANK_ENV_VARIABLE = "ROSETTA_SPARK_RANK_ENV"  # the harness's per-rank variables, as JSON, for the driver


@dataclass(frozen=True)
class Options:
    master: str = "spark://127.0.0.1:7077"  # the standalone master's URL (local[N] also works: one JVM)
    cores_per_rank: int = field(default=1, metadata={"min": 1, "max": 1024})  # spark.task.cpus, the rank's threads
    executor_memory: str = "1g"  # the executor JVM's heap (the ranks are processes of their own beside it)
    driver_host: str = ""  # the address the driver binds and the executors dial; "": Spark's choice (SPARK_LOCAL_IP)
    python: str = ""  # the executors' and ranks' interpreter; "": the harness's own (or the family's)
    workdir: str = ""  # the repository on the executors' machines; "": this one's path
    master_port: int = field(default=0, metadata={"min": 0, "max": 65535})  # rank 0's; 0: a free one there
    slots_timeout_s: int = field(default=60, metadata={"min": 5, "max": 3600})  # for world_size free task slots
    # network namespaces the cluster's workers run in (tools/netns_hosts.sh), the run's nodes: the driver runs
    # in the first, the run's `network` caps their links; (): the workers' machines are not the harness's
    hosts: tuple[str, ...] = field(default=(), metadata=host_list.HOST_FIELD)
    interface: str = "eth0"  # the hosts' network interface (the ranks' gloo sockets, network caps)


def command(request: LaunchRequest) -> LaunchCommand:
    """The driver, which stays for the run; its exit status is the stage's (1 when a rank failed), and
    stopping it stops the stage (its SparkContext stops, which kills the tasks and so the ranks)."""
    opts = options(request)
    argv = (request.python, "-m", "harness.launchers.spark.driver", request.rank_python, *worker_argv(request)[2:])
    rank_env = worker_env(request)
    if opts.hosts:  # the ranks' sockets on the hosts' link, which the cap shapes (not loopback)
        rank_env.update(GLOO_SOCKET_IFNAME=opts.interface, NCCL_SOCKET_IFNAME=opts.interface)
        argv = (*host_list.prefix(RemoteShell.NETNS, opts.hosts[0]), *argv)
    env = {RANK_ENV_VARIABLE: json.dumps(rank_env, sort_keys=True), "PYTHONUNBUFFERED": "1",
           "PYSPARK_PYTHON": options_python(request)}
    setup = host_list.shaping(request.spec, opts.hosts, RemoteShell.NETNS, opts.interface) if opts.hosts else ()
    return LaunchCommand(argv, env, setup=setup)


def options_python(request: LaunchRequest) -> str:
    """The executors' interpreter: the option's, else the harness's (the ranks' may be a family's)."""
    return options(request).python or request.python


def java_missing() -> bool:
    home = os.environ.get("JAVA_HOME", "")
    return shutil.which("java") is None and not (home and os.path.exists(os.path.join(home, "bin", "java")))


def unsupported_reason(spec: RunSpec) -> str | None:
    opts = options(spec)  # the scenario's hosts and cap first: they are wrong on any machine
    if opts.hosts or spec.network != "unlimited":
        reason = host_list.check(spec, opts.hosts, (), RemoteShell.NETNS if opts.hosts else RemoteShell.SSH, "spark")
        if reason:
            return reason
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark not installed (pip install -e '.[engines]')"
    if java_missing():
        return "Spark needs Java 17+: no java on PATH and no JAVA_HOME (apt-get install openjdk-17-jre-headless)"
    return None
