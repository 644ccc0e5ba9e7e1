"""A Spark standalone cluster of the pyspark wheel's own JVMs for the tests and the SparkNet benchmark: a
master and one worker per host, each ``spark-class`` started as a process group of its own on free ports,
waited for by its log line, and stopped by its group after (whatever the JVM forked). A host is
(argv prefix, address): ``((), "127.0.0.1")`` on this machine, or ``(("ip", "netns", "exec", NAME), ADDRESS)``
for a network-namespace host (tools/netns_hosts.sh), whose worker's executors (and so the ranks they start)
then live behind that host's link. A start that fails raises :class:`testbed.servers.Unavailable` with the
log's end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from testbed import process_group

START_S = 90  # a JVM's start on a loaded 2-core machine
Host = tuple[tuple[str, ...], str]


def free_port(address: str, prefix: Sequence[str] = ()) -> int:
    """A port no one listens on at ``address``, asked inside the namespace of ``prefix`` (when given)."""
    code = f"import socket; s = socket.socket(); s.bind(({address!r}, 0)); print(s.getsockname()[1])"
    return int(subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True,
                              check=True).stdout)


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


@contextmanager
def cluster(hosts: Sequence[Host], cores: int = 1, memory: str = "1g") -> Iterator[str]:
    """The master on the first host and a worker of ``cores`` task slots on every host; the master's URL."""
    temp = Path(tempfile.mkdtemp(prefix="rosetta-spark-"))
    prefix, address = hosts[0]
    port = free_port(address, prefix)
    master = f"spark://{address}:{port}"
    procs: list[subprocess.Popen] = []
    try:
        procs.append(_start([*prefix, "env", f"SPARK_LOCAL_IP={address}", spark_class(),
                             "org.apache.spark.deploy.master.Master", "--host", address, "--port", str(port),
                             "--webui-port", str(free_port(address, prefix))], temp / "master.log",
                            b"I have been elected leader", temp, "the Spark master"))
        for index, (prefix, address) in enumerate(hosts):
            procs.append(_start([*prefix, "env", f"SPARK_LOCAL_IP={address}", spark_class(),
                                 "org.apache.spark.deploy.worker.Worker", "--host", address, "--cores", str(cores),
                                 "--memory", memory, "--webui-port", str(free_port(address, prefix)), "--work-dir",
                                 str(temp / f"worker{index}"), master], temp / f"worker{index}.log",
                                b"Successfully registered with master", temp, f"Spark worker {index}"))
        yield master
    finally:
        for proc in reversed(procs):
            process_group.stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


def _start(argv: list[str], log: Path, ready: bytes, temp: Path, name: str) -> subprocess.Popen:
    """``argv`` as a process group of its own (testbed.process_group), its output into ``log``, once the log
    holds ``ready``; the ones started before it are stopped by :func:`cluster`'s finally."""
    env = {**os.environ, "SPARK_LOG_DIR": str(temp), "SPARK_NO_DAEMONIZE": "1", "PYSPARK_PYTHON": sys.executable}
    return process_group.start(argv, log, ready, START_S, env, name)
