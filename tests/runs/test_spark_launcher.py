"""The spark launcher on a real Spark standalone cluster: a master and one worker (2 cores), each a
``spark-class`` JVM of the pyspark wheel started by this module in a session of its own, bound to
127.0.0.1 on free ports, and stopped after by their process groups. A 2-rank torch_ddp run goes through
it as one barrier stage: local SGD, SparkNet's parameter averaging every tau steps (one row, 2 ranks' events)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.launchers import LaunchRequest, get, unsupported_reason
from harness.launchers.spark import java_missing
from harness.results import table as results
from tests.conftest import REPO
from tests.helpers.launch import run_spec as spec
from tests.helpers.servers import start as start_server, stop

pytest.importorskip("pyspark", reason="pyspark not installed (pip install -e '.[engines]')")
pytest.importorskip("torch")
if java_missing():
    pytest.skip("Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)", allow_module_level=True)

START_S = 60  # a JVM's start on a loaded 2-core machine
SCENARIO = """
name = "spark"
[settings]
warmup_steps = 1
measured_steps = 4
repeats = 1
timeout_s = 240
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
procs_per_node = 2
batch_per_worker = 2
launcher = "spark"
strategy = "local_sgd"
[strategy_options.local_sgd]
tau = 2
[launcher_options.spark]
master = "{master}"
driver_host = "127.0.0.1"
slots_timeout_s = 30
{extra}
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


@pytest.fixture(scope="module")
def spark_master():
    """A master and one worker of 2 cores and 1 GiB, on 127.0.0.1; the master's URL."""
    temp = Path(tempfile.mkdtemp(prefix="rosetta-spark-"))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(temp), "SPARK_WORKER_DIR": str(temp),
           "SPARK_NO_DAEMONIZE": "1", "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        procs.append(start_server([spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(free_port())], temp / "master.log",
                                  b"I have been elected leader", START_S, env, "the Spark master"))
        procs.append(start_server([spark_class(), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                   "--cores", "2", "--memory", "1g", "--webui-port", str(free_port()), "--work-dir",
                                   str(temp), master], temp / "worker.log", b"Successfully registered with master",
                                  START_S, env, "the Spark worker"))
        yield master
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


def run(tmp_path: Path, master: str, extra: str = "") -> list[dict]:
    path = tmp_path / "spark.toml"
    path.write_text(SCENARIO.format(master=master, extra=extra))
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(path), "--results",
                           str(tmp_path / "results"), "--allow-failures"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return results.load(tmp_path / "results").to_dict("records")


def test_torch_ddp_local_sgd_runs_as_a_barrier_stage(spark_master, tmp_path):
    """SparkNet's row: parameter averaging every tau = 2 steps, its 2 ranks the stage's 2 tasks."""
    (row,) = run(tmp_path, spark_master)
    assert row["status"] == "ok", row["reason"]
    assert row["weights_consistent"] is True  # every rank ends with the same (averaged) weights
    assert json.loads(row["strategy_options"]).get("tau") == 2
    run_dir = Path(row["run_dir"])
    assert {"events-rank0.jsonl", "events-rank1.jsonl"} <= {p.name for p in run_dir.iterdir()}
    log = (run_dir / "launcher.log").read_text()
    assert "2 rank(s) as one barrier stage on spark://127.0.0.1" in log and "2 rank(s) ended with status 0" in log


def test_a_rank_that_fails_fails_the_stage_and_the_others_are_stopped(spark_master, tmp_path):
    """Rank 0's store cannot bind its port (held here): rank 0 exits non-zero, its task fails, Spark kills
    the stage's other task, and rank 1 (waiting on the held port) dies with it, long before its timeout."""
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        start = time.monotonic()
        (row,) = run(tmp_path, spark_master, extra=f"master_port = {taken.getsockname()[1]}")
    assert row["status"] == "failed"
    log = (Path(row["run_dir"]) / "launcher.log").read_text()
    assert "spark_driver: rank 0 exited with status" in log, log[-2000:]
    assert time.monotonic() - start < 200  # the run's timeout_s is 240: rank 1 did not wait it out


def test_the_driver_is_what_runs_and_unsupported_runs_say_why():
    request = LaunchRequest(spec(launcher="spark", procs_per_node=2), "frameworks.torch_ddp.worker",
                            Path("/r/spec.json"), "/py/python", cpu_count=8, worker_python="/fam/python")
    command = get("spark")(request)
    assert command.argv == ("/py/python", "-m", "harness.launchers.spark.driver", "/fam/python",
                            "frameworks.torch_ddp.worker", "/r/spec.json")
    assert command.env["PYSPARK_PYTHON"] == "/py/python"
    assert json.loads(command.env["ROSETTA_SPARK_RANK_ENV"])["PYTHONUNBUFFERED"] == "1"
    assert "network caps" in unsupported_reason("spark", spec(launcher="spark", network="1gbit"))
    assert unsupported_reason("spark", spec(launcher="spark")) is None
