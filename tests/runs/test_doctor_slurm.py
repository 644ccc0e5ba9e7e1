"""``rosetta doctor`` under SLURM: a real 2-node SLURM cluster of this machine (tools/slurm_cluster.sh with
ROSETTA_SLURM_NODES=2: two slurmd, one a node, each at its own address of the cluster's namespace), the check
run inside one job spanning both nodes (salloc --nodes=2), every probe a step of that job on the node it
probes (remote = "srun"), the hosts and their addresses taken from the job. A GPU of the second node is
planted twice as slow ([faults] slow_gpu, emulated): the doctor names it and not the other node's. The link
figures are not asserted: both nodes share one machine's veth, there is no card to tell apart. Dilation 16
(the emulated step's sleep, 3 s, holds the CPU's own work: at k = 4 and a load of 29 on 2 cores a GPU planted
1.5x slow read 0.58 against 0.52 s) and the median of 3 steps (a healthy probe's one step starved to 5.6 s
at a load of 31 outweighed a median of 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, SLURM_NETNS, need_root_tools, start_engine

pytest.importorskip("torch")

NETNS = f"{SLURM_NETNS}-nodes"  # its own cluster: the one-node fixture's may run beside it
SCENARIO = """
name = "doctor-slurm"
[settings]
device = "emulated"
warmup_steps = 1
measured_steps = 3
repeats = 1
timeout_s = 300
[emulation]
accelerator = "v100"
exchange = "gradients"
dilation = 16
step_variation = "none"
[faults]
kind = "slow_gpu"
factor = 2.0
rank = 1
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
batch_per_worker = 64
nodes = 2
procs_per_node = 1
launcher = "torchrun"
[launcher_options.torchrun]
remote = "srun"
interface = "veth-slurm0"
"""


@pytest.fixture(scope="module")
def two_node_slurm(tmp_path_factory):
    need_root_tools("slurmctld", "slurmd", "munged", "salloc", "srun", "ip")
    state = tmp_path_factory.mktemp("slurm-nodes")
    env = {**os.environ, "ROSETTA_SLURM_NETNS": NETNS, "ROSETTA_SLURM_NODES": "2"}
    lines = start_engine([str(REPO / "tools/slurm_cluster.sh"), "start", str(state)], env).splitlines()
    yield dict(line.split("=", 1) for line in lines)["SLURM_CONF"]
    subprocess.run([str(REPO / "tools/slurm_cluster.sh"), "stop", str(state)], check=False, env=env)


def test_a_slow_gpu_is_named_by_a_check_run_as_steps_of_one_job(two_node_slurm, tmp_path):
    scenario, out, results = tmp_path / "s.toml", tmp_path / "doctor.json", tmp_path / "results"
    scenario.write_text(SCENARIO)
    done = subprocess.run(["ip", "netns", "exec", NETNS, "salloc", "--nodes=2", "--time=10", sys.executable, "-m",
                           "harness.cli", "doctor", "--scenario", str(scenario), "--bytes", "1M", "--results",
                           str(results), "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SLURM_CONF": two_node_slurm})
    assert out.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert done.returncode == 1, doc["headline"]
    assert doc["hosts"] == ["rosetta-n1", "rosetta-n2"] and doc["machine_type"].startswith("emulated v100")
    named = {f["subject"] for f in doc["findings"] if f["probe"] == "compute"}
    assert named == {"rosetta-n2/gpu0"}, doc["headline"]  # the planted GPU, not the other node's
    compute = {m["subject"]: m["value"] for m in doc["measurements"] if m["probe"] == "compute"}
    assert compute["rosetta-n2/gpu0"] > compute["rosetta-n1/gpu0"], compute  # 2x planned; the load shrinks it
    probe = next((results / "runs" / doc["check_id"]).glob("*-rosetta-n2-gpu0"))
    command = json.dumps(json.loads((probe / "command.json").read_text()))
    assert "srun" in command and "--nodelist=rosetta-n2" in command  # a step of the job, on that node
