"""The ray launcher on a real Ray cluster of two nodes: two ``ray start`` processes (a head and a worker
node, one CPU each), started by this module and stopped after, by their process groups. Ray binds its
servers to every interface and takes 127.0.0.1 for the machine's outside address, so the cluster, the
harness and the ranks run in a network namespace that has only the loopback interface: nothing of it
can reach, or be reached from, outside this machine. Usage statistics and the dashboard are off."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.launchers import LaunchRequest, get, unsupported_reason
from harness.results import table as results
from tests.conftest import REPO, WORKER, need_root_tools
from tests.helpers.launch import run_spec as spec
from tests.helpers.servers import start as start_server, stop

pytest.importorskip("ray", reason="Ray not installed (pip install -e '.[engines]')")
pytest.importorskip("torch")

NAMESPACE = "rosetta-ray" + (WORKER and f"-{WORKER}")
ADDRESS = "127.0.0.1:6379"  # the head's GCS, inside the namespace (its ports are the namespace's own)
QUIET = {"RAY_USAGE_STATS_ENABLED": "0"}
START_S = 240  # a node's start on a loaded 2-core machine: 25-40 s measured
SCENARIO = """
name = "ray"
[settings]
warmup_steps = 1
measured_steps = 3
repeats = 1
timeout_s = 420
device = "cpu"
[matrix]
framework = {frameworks}
workload = "resnet50"
size = "tiny"
nodes = {nodes}
procs_per_node = 1
batch_per_worker = 2
launcher = "ray"
[launcher_options.ray]
address = "{address}"
{extra}
"""


def in_namespace(*argv: str) -> list[str]:
    return ["ip", "netns", "exec", NAMESPACE, *argv]


def start_node(argv: list[str], log: Path) -> subprocess.Popen:
    """``ray start ... --block`` in the namespace, as a process group of its own, once it says it started."""
    return start_server(in_namespace(str(Path(sys.executable).with_name("ray")), "start", *argv, "--block"), log,
                        b"Ray runtime started", START_S, {**os.environ, **QUIET}, "ray start")


@pytest.fixture(scope="module")
def ray_cluster():
    """A head (GCS at ADDRESS) and one worker node, one CPU each, in their own network namespace."""
    need_root_tools("ip")
    subprocess.run(["ip", "netns", "del", NAMESPACE], capture_output=True)  # one a killed test run left
    subprocess.run(["ip", "netns", "add", NAMESPACE], check=True)
    subprocess.run(in_namespace("ip", "link", "set", "lo", "up"), check=True)
    temp = Path(tempfile.mkdtemp(prefix="rosetta-ray-", dir="/tmp"))  # short: Ray's socket paths must fit
    nodes = []
    try:
        common = ["--num-cpus", "1", "--num-gpus", "0", "--disable-usage-stats", "--object-store-memory", "100000000"]
        nodes.append(start_node(["--head", "--port", ADDRESS.split(":")[1], "--include-dashboard=false",
                                 "--temp-dir", str(temp), *common], temp / "head.log"))
        nodes.append(start_node(["--address", ADDRESS, *common], temp / "node.log"))
        yield ADDRESS
    finally:
        for node in reversed(nodes):
            stop(node, term_wait_s=60)  # ray start then stops its raylet, GCS and workers
        subprocess.run(["ip", "netns", "del", NAMESPACE], capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)  # the nodes' logs and sockets


def run_in_namespace(tmp_path: Path, frameworks: str, nodes: int = 2, extra: str = "") -> list[dict]:
    """``rosetta run`` of the scenario inside the cluster's namespace (the driver reaches the head there)."""
    path = tmp_path / "ray.toml"
    path.write_text(SCENARIO.format(frameworks=frameworks, nodes=nodes, address=ADDRESS, extra=extra))
    done = subprocess.run(in_namespace(sys.executable, "-m", "harness.cli", "run", str(path), "--results",
                                       str(tmp_path / "results"), "--allow-failures"),
                          cwd=REPO, env={**os.environ, **QUIET}, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-2000:]
    return results.load(tmp_path / "results").to_dict("records")


def assert_across_two_nodes(row: dict) -> None:
    assert row["status"] == "ok", f"{row['framework']}: {row['reason']}"
    assert row["weights_consistent"] is True  # data parallel: every rank ends with the same weights
    hosts = json.loads(row["hosts"])
    assert len(hosts) == 2 and len(set(hosts)) == 2, hosts  # one rank on each Ray node


def test_torch_ddp_and_horovod_run_across_two_ray_nodes(ray_cluster, tmp_path):
    import importlib.util

    rows = {r["framework"]: r for r in run_in_namespace(tmp_path, '["torch_ddp", "horovod_torch"]')}
    assert_across_two_nodes(rows["torch_ddp"])
    if importlib.util.find_spec("horovod") is None:
        assert rows["horovod_torch"]["status"] == "skipped"
    else:
        assert_across_two_nodes(rows["horovod_torch"])  # Horovod's Gloo rendezvous served by the driver
    log = Path(rows["torch_ddp"]["run_dir"], "launcher.log").read_text()
    assert "records written into the run folder by the nodes" in log


def test_tf_mwms_with_tf_config_and_records_gathered_by_the_driver(ray_cluster, tmp_path):
    pytest.importorskip("tensorflow")
    (row,) = run_in_namespace(tmp_path, '"tf_mwms"', extra='run_folder = "gathered"')
    assert_across_two_nodes(row)
    run_dir = Path(row["run_dir"])
    assert "records gathered by the driver" in (run_dir / "launcher.log").read_text()
    assert {"rank0.log", "rank1.log", "events-rank0.jsonl", "events-rank1.jsonl"} <= {p.name for p in run_dir.iterdir()}
    assert not (run_dir / "tf-cluster").exists()  # the workers met through TF_CONFIG, not the run's folder


def test_a_cluster_without_room_is_a_failed_row_saying_so(ray_cluster, tmp_path):
    (row,) = run_in_namespace(tmp_path, '"torch_ddp"', nodes=3, extra="placement_timeout_s = 5")
    assert row["status"] == "failed"
    assert "the Ray cluster had no room for 3 node(s) of {'CPU': 1} on distinct nodes within 5 s" in row["reason"]


def test_the_driver_is_what_runs_and_unsupported_runs_say_why():
    request = LaunchRequest(spec(launcher="ray", nodes=2, procs_per_node=4), "frameworks.torch_ddp.worker",
                            Path("/r/spec.json"), "/py/python", cpu_count=8)
    command = get("ray")(request)
    assert command.argv == ("/py/python", "-m", "harness.launchers.ray.driver", "frameworks.torch_ddp.worker",
                            "/r/spec.json")
    assert command.env["RAY_USAGE_STATS_ENABLED"] == "0"
    assert "network caps" in unsupported_reason("ray", spec(launcher="ray", network="1gbit"))
    assert unsupported_reason("ray", spec(launcher="ray")) is None
