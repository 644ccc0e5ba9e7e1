"""Real Horovod + TensorFlow runs: horovodrun (Gloo controller) starts real worker processes, no mocks.

BERT on 2 processes with horovod_tf runs beside tf_mwms in tests/runs/test_tf_mwms_run.py, where their
losses are compared. TensorFlow and Horovod are imported only in the worker processes.
"""

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from harness.contract.workloads import RESNET50_PARAMS
from harness.experiment import scenario
from harness.running.runner import run_sweep
from tests.helpers.scenarios import tiny_scenario

MISSING = [m for m in ("tensorflow", "horovod") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"{' and '.join(MISSING)} not installed "
                                                      "(tensorflow: pip install -e '.[tf]'; horovod: "
                                                      "tools/install_horovod.py)")

SCENARIO = tiny_scenario("horovod-tf", matrix={"framework": "horovod_tf", "procs_per_node": [1, 2]})


def test_resnet_on_one_and_two_processes(write_scenario, tmp_path, monkeypatch):
    # horovodrun is a console script beside this interpreter; the launcher may look it up on PATH
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    small = SCENARIO.replace('size = "tiny"', 'size = "small"')  # ResNet-50 at 64x64
    rows = run_sweep(scenario.load(write_scenario(small)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok", "ok"], [r.get("reason") for r in rows]
    for row in rows:
        world = row["world_size"]
        assert row["launcher"] == "horovodrun" and row["samples_measured"] == world * 2 * 3
        assert row["weights_consistent"] is True  # the ranks' trainable variables hash the same
        assert row["parameters"] == RESNET50_PARAMS
        versions = json.loads(row["versions"])
        assert row["framework_version"] == versions["horovod"] and versions["tensorflow"].startswith("2.")
        run_dir = tmp_path / "results" / "runs" / row["sweep_id"] / row["run_id"].split("/")[1]
        hello = json.loads((run_dir / "events-rank0.jsonl").read_text().splitlines()[0])
        assert hello["backend"] == "horovod-gloo" and hello["world_size"] == world


def test_fp16_compression_under_mpirun_halves_the_bytes(write_scenario, tmp_path):
    """strategy fp16 (hvd.Compression.fp16) with Horovod's MPI controller, started by mpirun."""
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not found (Open MPI)")
    text = SCENARIO.replace("procs_per_node = [1, 2]", 'procs_per_node = 2\nlauncher = "mpirun"\nstrategy = "fp16"')
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["weights_consistent"] is True and row["parameters"] == RESNET50_PARAMS
    assert row["bytes_per_step"] == 2 * RESNET50_PARAMS and row["compression_ratio"] == pytest.approx(2.0)
    run_dir = tmp_path / "results" / "runs" / row["sweep_id"] / row["run_id"].split("/")[1]
    assert json.loads((run_dir / "events-rank1.jsonl").read_text().splitlines()[0])["backend"] == "horovod-mpi"


def test_xla_compiled_step_on_two_processes(write_scenario, tmp_path, monkeypatch):
    """compile = on: each rank's forward and backward pass is XLA-compiled and Horovod averages the
    gradients outside it (its allreduce op has no XLA kernel); the compiling first step is timed apart,
    before warm-up (compile_s), and the ranks still end with identical weights."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    text = SCENARIO.replace("procs_per_node = [1, 2]", 'procs_per_node = 2\ncompile = "on"')
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["compile"] == "on" and row["compile_s"] > 3 * row["step_time_p50_s"]
    assert row["weights_consistent"] is True and row["layout"] == "NHWC"
    run_dir = tmp_path / "results" / "runs" / row["sweep_id"] / row["run_id"].split("/")[1]
    for rank in range(2):
        kinds = [json.loads(line)["event"] for line in (run_dir / f"events-rank{rank}.jsonl").read_text().splitlines()]
        assert kinds.index("compile") < kinds.index("step")


# A real one-node SLURM cluster (tests/conftest.py): root only, skipped with the reason elsewhere.
from tests.conftest import IN_SLURM_NAMESPACE  # noqa: E402
from tests.runs.test_engines import _run as run_cli  # noqa: E402


def test_slurm_ranks_started_by_srun_join_through_pmix(slurm_conf, tmp_path):
    path = tmp_path / "slurm.toml"
    path.write_text(SCENARIO.replace("procs_per_node = [1, 2]", 'procs_per_node = 2\nlauncher = "slurm"'))
    (row,) = run_cli(IN_SLURM_NAMESPACE, path, tmp_path / "out",
                     {"SLURM_CONF": slurm_conf, "SLURM_MPI_TYPE": "pmix"})
    assert row["status"] == "ok", row["reason"]
    assert row["launcher"] == "slurm" and row["world_size"] == 2 and row["weights_consistent"] is True
