"""Azure ML command jobs: written by ``rosetta run --dry-run`` (and ``reproduce --at published``) from the
SDK's own objects and loaded back by the SDK (``azure.ai.ml.load_job``, offline) for every framework; the
rank entry run for real on this machine with the variables Azure ML's PyTorch distribution sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import frameworks
from harness.base.network import free_port
from harness.cli import main as cli
from harness.contract.events import read_rank
from harness.contract.spec import RunSpec, read_spec_file
from harness.launchers import azureml
from harness.launchers.azureml import entry as azureml_entry
from harness.results import table as results
from tests.helpers import REPO

ml = pytest.importorskip("azure.ai.ml", reason="the Azure ML SDK is not installed (pip install -e '.[engines]')")

EVERY_FRAMEWORK = """
name = "az"
[settings]
repeats = 1
[matrix]
framework = ["torch_ddp", "horovod_torch", "tf_mwms", "horovod_tf", "chainer"]
workload = "resnet50"
nodes = 2
procs_per_node = 4
launcher = "azureml"
[launcher_options.azureml]
compute = "nd-cluster"
instance_type = "Standard_ND96asr_v4"
"""
DISTRIBUTION = {"PyTorchJob": "pytorch", "MPIJob": "mpi", "TFJob": "tensorflow"}


def dry_run(path: Path | None, results_dir: Path, *extra: str) -> list[Path]:
    assert cli.main([*extra, "--results", str(results_dir), "--dry-run"] if extra else
                    ["run", str(path), "--results", str(results_dir), "--dry-run"]) == 0
    return sorted(results_dir.glob("dry-run/*/*/job.yaml"))


def test_every_framework_gets_a_job_the_sdk_loads_back(write_scenario, tmp_path):
    jobs = dry_run(write_scenario(EVERY_FRAMEWORK), tmp_path)
    assert len(jobs) == len([n for n in frameworks.names() if "azureml" in frameworks.get(n).launchers])
    for path in jobs:
        job = ml.load_job(path)
        spec, _ = read_spec_file(path.with_name("spec.json"))
        info = frameworks.get(spec.framework)
        assert job.type == "command" and job.compute.removeprefix("azureml:") == "nd-cluster"
        assert job.resources.instance_count == 2 and job.resources.instance_type == "Standard_ND96asr_v4"
        assert job.distribution.type == DISTRIBUTION[info.kubernetes_job], spec.framework
        if job.distribution.type == "tensorflow":
            assert (job.distribution.worker_count, job.distribution.parameter_server_count) == (8, 0)
        else:
            assert job.distribution.process_count_per_instance == 4
        assert job.environment.image == info.image
        assert job.command.split()[3:5] == [info.worker_module, "${{outputs.run}}"]
        assert Path(job.code) == REPO  # the repository is the job's code
        carried = json.loads(job.environment_variables[azureml.SPEC_VARIABLE])
        assert RunSpec.from_json(carried["run"]) == spec  # the ranks run exactly the run planned
        assert job.outputs["run"].mode == "rw_mount" and job.limits.timeout == int(spec.timeout_s)
        assert json.loads(path.with_name("command.json").read_text())["argv"] == [
            "az", "ml", "job", "create", "--file", str(path), "--stream"]


def test_blob_is_a_datastore_input_and_others_say_they_are_not_mapped(write_scenario, tmp_path):
    text = EVERY_FRAMEWORK.replace('framework = ["torch_ddp", "horovod_torch", "tf_mwms", "horovod_tf", "chainer"]',
                                   'framework = "torch_ddp"\nstorage = ["blob", "s3"]')
    text += ('\n[storage_options.blob]\nurl = "abfs://imagenet/train/shards"\n'
             '[storage_options.s3]\nurl = "s3://bucket/imagenet"\nendpoint_url = "http://127.0.0.1:9"\n')
    blob, s3 = (ml.load_job(p) for p in dry_run(write_scenario(text), tmp_path))
    data = blob.inputs["data"]
    assert (data.type, data.mode) == ("uri_folder", "ro_mount")
    assert data.path == "azureml://datastores/workspaceblobstore/paths/train/shards"
    assert blob.command.endswith("${{outputs.run}} ${{inputs.data}}")
    assert "data" not in s3.inputs and s3.tags["rosetta.storage"].startswith("s3: not mapped")
    assert azureml.blob_path("https://acct.blob.core.windows.net/imagenet/train") == "train"
    assert azureml.blob_path("abfs://imagenet@acct.dfs.core.windows.net/train/x") == "train/x"


@pytest.mark.parametrize("reference", sorted(p.stem for p in (REPO / "results" /
                                                              "reference").glob("batchai-*.toml")))
def test_the_seeds_batch_ai_experiments_become_azure_ml_jobs(reference, tmp_path):
    jobs = dry_run(None, tmp_path, "reproduce", reference, "--at", "published", "--launcher", "azureml")
    assert jobs, f"{reference}: no job written"
    for path in jobs:
        job = ml.load_job(path)
        spec, _ = read_spec_file(path.with_name("spec.json"))
        assert job.resources.instance_count == spec.nodes and spec.launcher == "azureml"
        assert spec.device.value == "cuda"  # the published GPUs, not this machine's


@pytest.mark.runs
def test_a_real_run_is_a_skipped_row_saying_how_to_submit(write_scenario, tmp_path):
    text = EVERY_FRAMEWORK.replace('["torch_ddp", "horovod_torch", "tf_mwms", "horovod_tf", "chainer"]',
                                   '"torch_ddp"')
    assert cli.main(["run", str(write_scenario(text)), "--results", str(tmp_path)]) == 0
    (row,) = results.load(tmp_path).to_dict("records")
    assert row["status"] == "skipped" and row["reason"] == azureml.NOT_SUBMITTED


def test_the_blob_mount_is_read_as_a_folder_and_records_go_to_the_output():
    doc = {"format": 2, "run": {"storage": "blob", "storage_options": {"url": "abfs://c/p", "layout": "tar"}},
           "out_dir": ""}
    rank = azureml_entry.rank_document(doc, "/mnt/out", "/mnt/data")
    assert rank["out_dir"] == "/mnt/out" and rank["run"]["storage"] == "local"
    assert rank["run"]["storage_options"] == {"url": "/mnt/data", "layout": "tar"}
    assert azureml_entry.rank_document(doc, "/mnt/out", None)["run"] == doc["run"]


@pytest.mark.runs
def test_the_rank_entry_trains_with_the_variables_azure_ml_sets(write_scenario, tmp_path):
    """One rank as Azure ML's PyTorch distribution starts it: the spec from the job's variable, the
    records into the output folder, torch.distributed's variables set."""
    pytest.importorskip("torch")
    text = EVERY_FRAMEWORK.replace('["torch_ddp", "horovod_torch", "tf_mwms", "horovod_tf", "chainer"]',
                                   '"torch_ddp"').replace("nodes = 2", "nodes = 1").replace("procs_per_node = 4",
                                                                                          "procs_per_node = 1")
    text = text.replace("[matrix]", '[matrix]\nsize = "tiny"\nbatch_per_worker = 2')
    text = text.replace("repeats = 1", 'repeats = 1\nwarmup_steps = 1\nmeasured_steps = 2\ndevice = "cpu"')
    (path,) = dry_run(write_scenario(text), tmp_path / "plan")
    job = ml.load_job(path)
    output = tmp_path / "output"
    output.mkdir()
    env = {**os.environ, **job.environment_variables, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "NODE_RANK": "0"}
    argv = job.command.replace("${{outputs.run}}", str(output)).split()
    done = subprocess.run([sys.executable, *argv[1:]], env=env, cwd=job.code, timeout=300, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:] + (output / "rank0.log").read_text()[-2000:]
    rank = read_rank(output, 0)
    assert rank.exit == {**rank.exit, "code": 0} and len(rank.step_seconds) == 2 and not rank.errors


def test_the_command_line_quotes_every_argument_but_azure_mls_placeholders():
    line = azureml.shell_line(["x; touch /tmp/rosetta-pwned", "-m", "${{outputs.run}}", "${{inputs.x}}; rm -r /"])
    assert line == "'x; touch /tmp/rosetta-pwned' -m ${{outputs.run}} '${{inputs.x}}; rm -r /'"
