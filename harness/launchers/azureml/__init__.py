"""Azure ML: a command job per run (the successor of Batch AI), written from the SDK's own objects.

The job is built with ``azure.ai.ml`` (the ``engines`` extra) and dumped to ``job.yaml`` in the run's
folder: the framework's image as the environment, ``instance_count`` = nodes, and the distribution that
starts the framework the way its Kubernetes job does (``FrameworkInfo.kubernetes_job``):

- ``PyTorchDistribution(process_count_per_instance)``: Azure ML starts the ranks of each node with
  torch.distributed's variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK) (torch_ddp);
- ``MpiDistribution(process_count_per_instance)``: Azure ML runs mpirun over the nodes (Horovod, ChainerMN);
- ``TensorFlowDistribution(parameter_server_count=0, worker_count=W)``: each process gets its TF_CONFIG
  (tf_mwms, as under a Kubeflow TFJob: workers only).

Every process runs :mod:`harness.launchers.azureml.entry`, which writes the run's spec (carried in the
job as ROSETTA_SPEC) with the job's ``run`` output folder as the place for the rank records, and starts
the worker. Storage: ``blob`` is a ``data`` input from an Azure ML datastore
(``azureml://datastores/<blob_datastore>/paths/<path>``), mounted read-only, which the ranks read as a
local folder; the other backends are not mapped (the ranks read them with their own options, as on any
cluster, and the job's tags say so). The code is the repository (``code``), uploaded by Azure ML on
submission.

Rosetta writes the jobs and does not submit them (``rosetta run --dry-run``; the command it records is
``az ml job create --file job.yaml --stream``): a real run here is a ``skipped`` row saying so.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from harness.base import escaping
from harness.base.errors import UserError
from harness.contract.axes import Storage
from harness.contract.spec import SPEC_FORMAT, RunSpec
from harness.launchers import LaunchCommand, LaunchRequest, framework_image, options, worker_env

JOB = "job.yaml"
CLUSTER = True  # runs on a scheduler's nodes: `reproduce --at published` sets no limit from this machine
PLACEHOLDER = re.compile(r"\$\{\{(inputs|outputs)\.\w+\}\}")  # ${{outputs.run}}: Azure ML's, replaced before the shell
SPEC_VARIABLE = "ROSETTA_SPEC"  # the run's spec document, as JSON (azureml_entry reads it)
NOT_SUBMITTED = ("azureml: Rosetta writes Azure ML jobs and does not submit them (rosetta run --dry-run writes "
                 "job.yaml per run; az ml job create --file job.yaml submits one to a workspace)")


@dataclass(frozen=True)
class Options:
    compute: str = "gpu-cluster"  # the workspace's compute cluster
    instance_type: str = ""  # e.g. "Standard_ND96asr_v4"; "": the cluster's
    image: str = ""  # "": the framework's own (FrameworkInfo.image, built from docker/), pushed where Azure ML pulls
    experiment_name: str = "rosetta"
    python: str = "python"  # the image's interpreter
    code: str = ""  # the folder uploaded as the job's code; "": this repository
    blob_datastore: str = "workspaceblobstore"  # the datastore registered for the blob url's container
    cpus_per_instance: int = field(default=0, metadata={"min": 0, "max": 4096})  # 0: threads from this machine's
    shm_size: str = "16g"  # /dev/shm of each node's container (NCCL, DataLoader workers)


def distribution(request: LaunchRequest) -> Any:
    """The SDK's distribution for the framework's way of starting ranks (its Kubernetes job kind)."""
    from azure.ai.ml import MpiDistribution, PyTorchDistribution, TensorFlowDistribution

    import frameworks

    spec = request.spec
    kind = frameworks.get(spec.framework).kubernetes_job
    if kind == "TFJob":
        return TensorFlowDistribution(parameter_server_count=0, worker_count=spec.world_size)
    if kind == "MPIJob":
        return MpiDistribution(process_count_per_instance=spec.procs_per_node)
    return PyTorchDistribution(process_count_per_instance=spec.procs_per_node)


def blob_path(url: str) -> str:
    """A blob url's path within its container, as a datastore path: ``p`` of ``abfs://container/p``,
    ``abfs://container@account.dfs.core.windows.net/p`` or ``https://account.blob.core.windows.net/container/p``."""
    parts = urlsplit(url)
    path = parts.path.lstrip("/")
    if parts.scheme in ("http", "https"):  # the container is the path's first part
        path = path.split("/", 1)[1] if "/" in path else ""
    return path


def data_input(request: LaunchRequest) -> tuple[dict[str, Any], str]:
    """The job's data input for the run's storage, and a note for its tags on how the data is reached."""
    from azure.ai.ml import Input

    spec, opts = request.spec, options(request)
    if spec.storage == Storage.SYNTHETIC:
        return {}, "synthetic: no input"
    if spec.storage == Storage.BLOB:
        path = f"azureml://datastores/{opts.blob_datastore}/paths/{blob_path(spec.storage_options['url'])}"
        return ({"data": Input(type="uri_folder", path=path, mode="ro_mount")},
                f"blob: the datastore {opts.blob_datastore}, mounted read-only and read as a folder")
    return {}, (f"{spec.storage.value}: not mapped to an Azure ML input; the ranks read it with its own options "
                f"(the compute cluster must reach it)")


def shell_line(argv: list[str]) -> str:
    """The job's command, a shell line on the nodes: every argument quoted but Azure ML's ``${{...}}``
    placeholders, which it replaces with mount paths before the shell reads the line."""
    return " ".join(a if PLACEHOLDER.fullmatch(a) else escaping.shell_word(a) for a in argv)


def job(request: LaunchRequest) -> Any:
    """The run's Azure ML command job (an ``azure.ai.ml.entities.CommandJob``)."""
    try:
        from azure.ai.ml import Output, command
        from azure.ai.ml.entities import Environment
    except ImportError as exc:
        raise UserError(f"launcher azureml: the Azure ML SDK is not installed ({exc}); "
                        f"pip install -e '.[engines]'") from exc
    spec, opts = request.spec, options(request)
    inputs, storage_note = data_input(request)
    doc = {"format": SPEC_FORMAT, "run": spec.to_json(), "out_dir": ""}  # out_dir: the job's run output
    argv = [opts.python, "-m", "harness.launchers.azureml.entry", request.worker_module, "${{outputs.run}}"]
    if inputs:
        argv.append("${{inputs.data}}")
    env = {**worker_env(request, opts.cpus_per_instance or None), SPEC_VARIABLE: json.dumps(doc)}
    node = command(
        name=None, display_name=f"{spec.framework} {spec.workload.value}/{spec.size.value} "
                                f"{spec.nodes}x{spec.procs_per_node} r{spec.repeat}",
        description=f"Rosetta run {request.spec_file}", experiment_name=opts.experiment_name,
        command=shell_line(argv),
        code=opts.code or str(request.repo_root),
        environment=Environment(image=framework_image(request, opts.image)), environment_variables=env,
        compute=opts.compute, instance_count=spec.nodes, instance_type=opts.instance_type or None,
        distribution=distribution(request), inputs=inputs,
        outputs={"run": Output(type="uri_folder", mode="rw_mount")}, shm_size=opts.shm_size,
        timeout=int(spec.timeout_s), tags={"rosetta.config_id": spec.config_id(), "rosetta.storage": storage_note})
    return node._to_job()  # noqa: SLF001 - what MLClient.jobs.create_or_update submits for a command node


def job_yaml(request: LaunchRequest) -> str:
    out = io.StringIO()
    job(request).dump(out)
    return out.getvalue()


def command(request: LaunchRequest) -> LaunchCommand:
    """``az ml job create --file job.yaml --stream``: what submits the written job (Rosetta does not)."""
    return LaunchCommand(("az", "ml", "job", "create", "--file", str(request.run_dir / JOB), "--stream"),
                         files={JOB: job_yaml(request)})


def unsupported_reason(spec: RunSpec) -> str | None:
    return NOT_SUBMITTED
