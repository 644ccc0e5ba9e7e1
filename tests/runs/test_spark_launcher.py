"""The spark launcher on a real Spark standalone cluster: a master and two workers of one task slot each,
``spark-class`` JVMs of the pyspark wheel bound to 127.0.0.1 on free ports (testbed.spark_cluster),
stopped after by their process groups. 2-rank torch_ddp runs go through it as one barrier stage, a task on
each worker: plain allreduce (a gloo allreduce between the two workers' ranks every step) and local SGD,
SparkNet's parameter averaging every tau steps (a row each, both ranks' events)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.launchers import LaunchRequest, get, unsupported_reason
from harness.launchers.spark import java_missing
from harness.results import table as results
from tests.conftest import REPO
from tests.helpers.launch import run_spec as spec
from testbed import spark_cluster
from testbed.servers import Unavailable

pytest.importorskip("pyspark", reason="pyspark not installed (pip install -e '.[engines]')")
pytest.importorskip("torch")
if java_missing():
    pytest.skip("Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)", allow_module_level=True)

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
strategy = {strategies}
[strategy_options.local_sgd]
tau = 2
[launcher_options.spark]
master = "{master}"
driver_host = "127.0.0.1"
slots_timeout_s = 30
{extra}
"""


@pytest.fixture(scope="module")
def spark_master():
    """A master and two workers of one core and 1 GiB each, on 127.0.0.1; the master's URL."""
    try:
        with spark_cluster.cluster([((), "127.0.0.1"), ((), "127.0.0.1")]) as master:
            yield master
    except Unavailable as exc:
        pytest.skip(str(exc))


def run(tmp_path: Path, master: str, extra: str = "", strategies: str = '"local_sgd"') -> list[dict]:
    path = tmp_path / "spark.toml"
    path.write_text(SCENARIO.format(master=master, extra=extra, strategies=strategies))
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(path), "--results",
                           str(tmp_path / "results"), "--allow-failures"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return results.load(tmp_path / "results").to_dict("records")


def test_allreduce_and_local_sgd_run_as_a_barrier_stage_over_two_workers(spark_master, tmp_path):
    """Plain allreduce (a gloo allreduce between the two workers' ranks every step) and SparkNet's row,
    parameter averaging every tau = 2 steps: each run's 2 ranks are the stage's 2 tasks, one per worker."""
    rows = {row["strategy"]: row for row in run(tmp_path, spark_master, strategies='["allreduce", "local_sgd"]')}
    assert set(rows) == {"allreduce", "local_sgd"}
    for strategy, row in rows.items():
        assert row["status"] == "ok", f"{strategy}: {row['reason']}"
        assert row["world_size"] == 2 and row["weights_consistent"] is True  # the same weights on both ranks
        assert row["samples_measured"] == 2 * 2 * 4  # counted on both ranks: 2 ranks x batch 2 x 4 steps
        assert len(json.loads(row["rank_peak_rss_mb"])) == 2
        run_dir = Path(row["run_dir"])
        for rank in (0, 1):
            events = [json.loads(line) for line in (run_dir / f"events-rank{rank}.jsonl").read_text().splitlines()]
            steps = [e for e in events if e.get("event") == "step" and e.get("phase") == "measure"]
            assert len(steps) == 4 and sum(e["samples"] for e in steps) == 2 * 4, rank  # batch 2, 4 steps
        log = (run_dir / "launcher.log").read_text()
        assert "2 rank(s) as one barrier stage on spark://127.0.0.1" in log and "2 rank(s) ended with status 0" in log
    assert rows["allreduce"]["bytes_per_step"] > 0  # gradients went through gloo every step
    assert rows["local_sgd"]["bytes_per_step"] < rows["allreduce"]["bytes_per_step"]  # averaged every 2nd step
    assert json.loads(rows["local_sgd"]["strategy_options"]).get("tau") == 2


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
