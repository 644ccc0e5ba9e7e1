"""SLURM scripts and Kubernetes manifests, checked as what would run (and the manifests validated offline: pod
templates against Kubernetes' schemas, the job against the PyTorchJob schema). What every launcher does,
its dry run included, is tests/conformance/test_conformance_launchers.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.base.errors import UserError
from harness.experiment import scenario
from harness.launchers import LaunchRequest, get, slurm
from tests.helpers import REPO
from tests.helpers.launch import launch_request, run_spec as spec

SCHEMA = REPO / "tests" / "data" / "pytorchjob-v1.schema.json"


def _request(launcher: str, **kw) -> LaunchRequest:
    return launch_request(spec(launcher=launcher, **kw), cpu_count=64)


def test_slurm_script_states_resources_and_starts_one_rank_per_task():
    options = {"partition": "gpu", "account": "ml", "gpus_per_node": 8, "cpus_per_task": 12, "time_limit_min": 45,
               "extra_sbatch": ("--exclusive",)}
    command = get("slurm")(_request("slurm", nodes=4, procs_per_node=8, launcher_options=options))
    assert command.argv == ("/venv/bin/python", "-m", "harness.launchers.slurm.sbatch_wait", "/res/runs/S1/0007/job.sbatch")
    assert command.abort == (("scancel", "--name", "rosetta-S1-0007"),)
    script = command.files["job.sbatch"].splitlines()
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=8", "#SBATCH --partition=gpu",
                 "#SBATCH --account=ml", "#SBATCH --gpus-per-node=8", "#SBATCH --cpus-per-task=12",
                 "#SBATCH --time=45", "#SBATCH --exclusive", "#SBATCH --chdir=/repo", "export MASTER_PORT=29500"):
        assert line in script
    assert script[-1] == ("srun /venv/bin/python -m harness.contract.worker frameworks.torch_ddp.worker "
                          "/res/runs/S1/0007/spec.json")
    assert command.env["OMP_NUM_THREADS"] == "12"  # the nodes' cores, not the submitting machine's


@pytest.mark.parametrize("runtime, expected", [
    ("pyxis", "srun --container-image=img:1 --container-mounts=/data:/data,/res:/res "
              "--container-workdir=/opt/rosetta python -m harness.contract.worker"),
    ("apptainer", "srun apptainer exec --bind /data:/data --bind /res:/res --pwd /opt/rosetta img:1 python "
                  "-m harness.contract.worker"),
])
def test_slurm_containers_mount_the_results(runtime, expected):
    options = {"container_runtime": runtime, "container_image": "img:1", "container_mounts": ("/data:/data",)}
    script = get("slurm")(_request("slurm", launcher_options=options)).files["job.sbatch"]
    assert script.splitlines()[-1].startswith(expected)


@pytest.mark.parametrize("runtime, expected", [("pyxis", "--container-image={}"), ("apptainer", "docker://{}")])
def test_slurm_containers_default_to_the_frameworks_image(runtime, expected):
    import frameworks

    script = get("slurm")(_request("slurm", launcher_options={"container_runtime": runtime})).files["job.sbatch"]
    assert expected.format(frameworks.get("torch_ddp").image) in script.splitlines()[-1].split()
    assert slurm.Options().container_image == ""  # the framework's (FrameworkInfo.image)


def _pytorchjob(**kw) -> dict:
    command = get("kubernetes")(_request("kubernetes", **kw))
    assert command.setup == (("kubectl", "apply", "-f", "/res/runs/S1/0007/job.yaml"),)
    return yaml.safe_load(command.files["job.yaml"])


def test_kubernetes_pytorchjob_validates_offline():
    jsonschema = pytest.importorskip("jsonschema")
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    options = {"gpus_per_node": 8, "cpu": "96", "memory": "1Ti", "node_selector": ("gpu=h100",), "image": "r/t:1"}
    job = _pytorchjob(nodes=4, procs_per_node=8, launcher_options=options)
    jsonschema.validate(job, json.loads(SCHEMA.read_text()))
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 3)
    for role in replicas.values():
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **role["template"]["metadata"]},
               "spec": role["template"]["spec"]}
        kubernetes_validate.validate(pod, "1.37.0", strict=True)
        (container,) = pod["spec"]["containers"]
        assert container["resources"]["limits"] == {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"}
        assert container["command"][container["command"].index("--node-rank") + 1] == "$(RANK)"
        assert {"name": "OMP_NUM_THREADS", "value": "12"} in container["env"]
        assert {"name": "results", "mountPath": "/res"} in container["volumeMounts"]
        assert pod["spec"]["nodeSelector"] == {"gpu": "h100"}


def test_kubernetes_single_node_job_has_no_workers():
    job = _pytorchjob()
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Master"]
    assert job["metadata"]["name"] == "rosetta-s1-0007"


def test_a_bad_launcher_option_is_a_one_line_error(write_scenario):
    text = """
    [matrix]
    framework = "torch_ddp"
    workload = "resnet50"
    launcher = "slurm"
    [launcher_options.slurm]
    partiton = "gpu"
    """
    with pytest.raises(UserError, match=r"\[launcher_options.slurm\] partiton: unknown key; allowed: partition,"):
        scenario.load(write_scenario(text))
    with pytest.raises(UserError, match=r"\[launcher_options\] pbs: must be one of torchrun, mpirun, horovodrun, slurm"):
        scenario.load(write_scenario(text.replace("launcher_options.slurm", "launcher_options.pbs")))
    with pytest.raises(UserError, match=r"\[matrix\] network: must be 'unlimited' or a rate like '10gbit'"):
        scenario.load(write_scenario(text.replace('launcher = "slurm"', 'network = "fast"')))
    with pytest.raises(UserError, match=r"\[matrix\] launcher: must be one of auto, torchrun"):
        scenario.load(write_scenario(text.replace('launcher = "slurm"', 'launcher = "pbs"')))


def _job(framework_kind: str, **kw) -> dict:
    options = {"kind": framework_kind, "gpus_per_node": 8, "cpu": "96", "memory": "1Ti", "image": "r/h:1"}
    command = get("kubernetes")(_request("kubernetes", nodes=4, procs_per_node=8, launcher_options=options, **kw))
    assert command.argv[-4] == framework_kind.lower() == command.abort[0][3]
    return yaml.safe_load(command.files["job.yaml"])


def _validate_pods(replicas: dict) -> list[dict]:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    pods = []
    for role in replicas.values():
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **role["template"]["metadata"]},
               "spec": role["template"]["spec"]}
        kubernetes_validate.validate(pod, "1.37.0", strict=True)
        pods.append(pod)
    return pods


def test_kubernetes_mpijob_runs_mpirun_from_a_launcher_over_sshd_workers():
    jsonschema = pytest.importorskip("jsonschema")
    job = _job("MPIJob")
    jsonschema.validate(job, json.loads((SCHEMA.parent / "mpijob-v2beta1.schema.json").read_text()))
    assert job["apiVersion"] == "kubeflow.org/v2beta1" and job["spec"]["slotsPerWorker"] == 8
    replicas = job["spec"]["mpiReplicaSpecs"]
    assert (replicas["Launcher"]["replicas"], replicas["Worker"]["replicas"]) == (1, 4)
    launcher, worker = (p["spec"]["containers"][0] for p in _validate_pods(replicas))
    assert launcher["command"][:3] == ["mpirun", "-np", "32"] and "-x" in launcher["command"]
    assert launcher["command"][-5:] == ["python", "-m", "harness.contract.worker", "frameworks.torch_ddp.worker",
                                        "/res/runs/S1/0007/spec.json"]
    assert launcher["resources"] == {}  # the launcher takes no GPU from the workers' nodes
    assert worker["command"] == ["/usr/sbin/sshd", "-De"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_kubernetes_tfjob_has_one_pod_per_rank():
    jsonschema = pytest.importorskip("jsonschema")
    job = _job("TFJob")
    jsonschema.validate(job, json.loads((SCHEMA.parent / "tfjob-v1.schema.json").read_text()))
    (pod,) = _validate_pods(job["spec"]["tfReplicaSpecs"])
    assert job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 32
    (container,) = pod["spec"]["containers"]
    assert container["name"] == "tensorflow" and container["command"][1:3] == ["-m", "harness.contract.worker"]
    assert {"name": "OMP_NUM_THREADS", "value": "96"} in container["env"]  # one rank owns the pod's cores


def test_the_kind_defaults_to_the_frameworks_own():
    job = _pytorchjob()
    assert job["kind"] == "PyTorchJob"
    with pytest.raises(UserError, match=r"kind: must be one of auto, PyTorchJob, MPIJob, TFJob, TrainJob"):
        get("kubernetes")(_request("kubernetes", launcher_options={"kind": "RayJob"}))


def test_tf_config_gives_the_rank():
    from harness.contract.worker import rank_from_env, torch_variables

    tf_config = json.dumps({"cluster": {"worker": ["a:2222", "b:2222"]}, "task": {"type": "worker", "index": 1}})
    assert rank_from_env({"TF_CONFIG": tf_config}) == 1
    assert torch_variables({"TF_CONFIG": tf_config})["WORLD_SIZE"] == "2"
    assert torch_variables({"TF_CONFIG": tf_config, "OMPI_COMM_WORLD_RANK": "0"})["RANK"] == "0"


# ------------------------------------------------------------------ Kubeflow Trainer v2: TrainJob

def _crd_schema(name: str) -> dict:
    """A vendored CRD schema (tests/data, from kubeflow/trainer v2.3.0), made strict as
    ``kubectl apply --validate=strict`` is: a field the schema does not know is an error, not pruned."""
    schema = yaml.load((SCHEMA.parent / f"{name}-v1alpha1.schema.yaml").read_text(), Loader=yaml.CSafeLoader)

    def strict(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                strict(value)
        elif isinstance(node, list):
            for value in node:
                strict(value)
        return node
    return strict(schema)


@pytest.mark.parametrize("framework", [name for name in __import__("frameworks").names()
                                       if "kubernetes" in __import__("frameworks").get(name).launchers])
def test_every_kubernetes_framework_gets_a_trainjob_that_validates(framework):
    import frameworks

    jsonschema = pytest.importorskip("jsonschema")
    info = frameworks.get(framework)
    options = {"kind": "TrainJob", "gpus_per_node": 8, "cpu": "96", "memory": "1Ti", "node_selector": ("gpu=h100",)}
    request = LaunchRequest(spec(launcher="kubernetes", framework=framework, nodes=4, procs_per_node=8,
                                 launcher_options=options), info.worker_module, Path("/res/runs/S1/0007/spec.json"),
                            "/venv/bin/python", cpu_count=64, repo_root=Path("/repo"))
    command = get("kubernetes")(request)
    job = yaml.safe_load(command.files["job.yaml"])
    schema = _crd_schema("trainjob")
    jsonschema.validate(job, schema)
    with pytest.raises(jsonschema.ValidationError, match="'workingDir' was unexpected"):  # strict: a trainer has none
        jsonschema.validate({**job, "spec": {**job["spec"], "trainer": {**job["spec"]["trainer"], "workingDir": "/"}}},
                            schema)
    assert (job["apiVersion"], job["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    trainer = job["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"], trainer["image"]) == (4, 8, info.image)
    assert trainer["resourcesPerNode"]["limits"] == {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"}
    assert trainer["command"][:3] == ["env", "-C", "/opt/rosetta"]  # the repository, where the image holds it
    assert trainer["command"][-3:] == ["harness.contract.worker", info.worker_module, "/res/runs/S1/0007/spec.json"]
    assert {"name": "OMP_NUM_THREADS", "value": "12"} in trainer["env"]
    (patch,) = job["spec"]["runtimePatches"]
    for replicated in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
        pod = replicated["template"]["spec"]["template"]["spec"]
        assert {"name": "results", "mountPath": "/res"} in pod["containers"][0]["volumeMounts"]
        assert pod["nodeSelector"] == {"gpu": "h100"}
    runtime = job["spec"]["runtimeRef"]["name"]
    assert command.argv[:3] == ("kubectl", "wait", "--for=condition=Complete") and command.argv[4] == "trainjob"
    if info.kubernetes_job != "MPIJob":  # torch-distributed's PET_* variables give torchrun the nodes and rendezvous
        assert runtime == "torch-distributed" and "runtime.yaml" not in command.files
        assert trainer["command"][3:7] == ["python", "-m", "torch.distributed.run", "--no-python"]
        return
    assert runtime == f"rosetta-mpi-{info.image.split('/')[-1].split(':')[0]}"
    assert trainer["command"][3:6] == ["mpirun", "-np", "32"]
    assert command.setup == (("kubectl", "apply", "-f", "/res/runs/S1/0007/runtime.yaml",
                              "-f", "/res/runs/S1/0007/job.yaml"),)
    made = yaml.safe_load(command.files["runtime.yaml"])
    jsonschema.validate(made, _crd_schema("clustertrainingruntime"))
    assert made["metadata"]["name"] == runtime and made["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] == "OpenMPI"
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for replicated in made["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": replicated["template"]["spec"]["template"]["spec"]}
        kubernetes_validate.validate(pod, "1.37.0", strict=True)
        assert pod["spec"]["containers"][0]["image"] == info.image  # the node pods run the framework's image


def test_a_named_runtime_is_referenced_and_not_written():
    command = get("kubernetes")(_request("kubernetes", framework="horovod_torch",
                                         launcher_options={"kind": "TrainJob", "runtime": "site-mpi"}))
    assert yaml.safe_load(command.files["job.yaml"])["spec"]["runtimeRef"]["name"] == "site-mpi"
    assert list(command.files) == ["job.yaml"]
