"""``python -m harness.launchers.spark.driver RANK_PYTHON MODULE SPEC``: a run's ranks as one Spark
barrier stage (see :mod:`harness.launchers.spark` for what each rank gets).

Run as ``-m``, this module is ``__main__``, so pyspark (cloudpickle) sends the task function to the
executors by value: they need pyspark and the repository's environment, never this module's import
path. The task's code uses the standard library and pyspark only. pyspark is imported inside
functions: the harness imports no engine at module level.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
from typing import Any, Callable, Iterator

CHECK_INTERVAL_S = 5  # how often Spark asks whether the cluster has a slot for every task of the stage


def rank_task(argv: list[str], cwd: str, env: dict[str, str], master_port: int,
              host_variable: str) -> Callable[[Iterator], Iterator]:
    """The barrier stage's task: this task's rank and the rendezvous from its BarrierTaskContext, then
    the rank as a child process; raises (failing the stage) when the rank exits non-zero. Where the
    executors have several addresses, ``host_variable`` names each rank's host by its executor's address
    (network-namespace hosts share one host name)."""

    def task(_partition: Iterator) -> Iterator[int]:
        import ctypes
        import socket
        import subprocess

        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        hosts = [info.address.rsplit(":", 1)[0] for info in context.getTaskInfos()]
        with socket.socket() as probe:  # a free port on this executor's host: rank 0's becomes MASTER_PORT
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        ports = [int(p) for p in context.allGather(str(port))]  # every task's, in partition order
        # ranks grouped by host (partition order within one), so that LOCAL_RANK counts a host's ranks
        order = sorted(range(len(hosts)), key=lambda i: (hosts[i], i))
        rank = order.index(context.partitionId())
        nodes = list(dict.fromkeys(hosts[i] for i in order))
        host = hosts[order[rank]]
        local = [hosts[i] for i in order[:rank]].count(host)
        rank_env = {**os.environ, **env, "RANK": str(rank), "WORLD_SIZE": str(len(hosts)),
                    "LOCAL_RANK": str(local), "LOCAL_WORLD_SIZE": str(hosts.count(host)),
                    "NODE_RANK": str(nodes.index(host)), "GROUP_RANK": str(nodes.index(host)),
                    "MASTER_ADDR": hosts[order[0]], "MASTER_PORT": str(master_port or ports[order[0]])}
        if len(nodes) > 1:
            rank_env.setdefault(host_variable, host)

        def die_with_task() -> None:  # the rank goes when its task's Python worker does (a killed stage)
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

        code = subprocess.run(argv, cwd=cwd, env=rank_env, preexec_fn=die_with_task).returncode
        if code != 0:
            raise RuntimeError(f"rank {rank} exited with status {code} (rank{rank}.log in the run folder)")
        yield code

    return task


def spark_conf(spec, opts, python: str) -> Any:
    from pyspark import SparkConf

    conf = (SparkConf().setMaster(opts.master).setAppName(f"rosetta-{spec.framework}-{spec.config_id()}")
            .set("spark.task.cpus", str(opts.cores_per_rank)).set("spark.executor.memory", opts.executor_memory)
            .set("spark.pyspark.python", python).set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            # a rank that fails fails the run: no task or stage retried (a rerun would be another run)
            .set("spark.task.maxFailures", "1").set("spark.stage.maxConsecutiveAttempts", "1")
            .set("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", f"{CHECK_INTERVAL_S}s")
            .set("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures",
                 str(math.ceil(opts.slots_timeout_s / CHECK_INTERVAL_S))))
    if opts.driver_host:
        conf.set("spark.driver.host", opts.driver_host).set("spark.driver.bindAddress", opts.driver_host)
    return conf


def reason(exc: Exception) -> str:
    """One line for the row: the rank's failure when a rank failed, else the error's first line."""
    text = str(exc)
    found = re.search(r"RuntimeError: (rank \d+ exited[^\n]*)", text)
    if found:
        return found.group(1)
    found = re.search(r"(Barrier execution mode does not allow[^\n]*|[^\n]*slots[^\n]*)", text)
    return (found.group(1) if found else next((line for line in text.splitlines() if line.strip()), repr(exc)))[:400]


def main(argv: list[str]) -> int:
    from pyspark import SparkContext

    from harness.contract.events import HOST_VARIABLE
    from harness.contract.spec import read_spec_file
    from harness.launchers import options
    from harness.launchers.spark import RANK_ENV_VARIABLE

    rank_python, module, spec_file = argv
    spec, _ = read_spec_file(spec_file)
    opts = options(spec)
    env = json.loads(os.environ.get(RANK_ENV_VARIABLE, "{}"))
    threads = str(opts.cores_per_rank)  # the task's cores (spark.task.cpus), not this machine's share
    env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    cwd = opts.workdir or os.getcwd()
    rank_argv = [opts.python or rank_python, "-m", "harness.contract.worker", module, os.path.abspath(spec_file)]
    context = SparkContext(conf=spark_conf(spec, opts, opts.python or sys.executable))
    context.setLogLevel("WARN")
    try:
        print(f"spark_driver: {spec.world_size} rank(s) as one barrier stage on {opts.master}", flush=True)
        stage = context.parallelize(range(spec.world_size), spec.world_size).barrier()
        codes = stage.mapPartitions(rank_task(rank_argv, cwd, env, opts.master_port, HOST_VARIABLE)).collect()
        print(f"spark_driver: {len(codes)} rank(s) ended with status 0", flush=True)
        return 0
    except Exception as exc:  # noqa: BLE001 (py4j's error carries the stage's failure as text)
        print(f"spark_driver: {reason(exc)}", file=sys.stderr)
        return 1
    finally:  # a stop (SIGTERM from the harness) ends here too: the stage's tasks are killed, their ranks with them
        context.stop()


def _stop(signum, _frame) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    sys.exit(main(sys.argv[1:]))
