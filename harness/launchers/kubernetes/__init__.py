"""Kubernetes: a Kubeflow job manifest per run, of the kind the framework is started by.

- ``PyTorchJob`` (Training Operator, kubeflow.org/v1): a Master pod and nodes-1 Worker pods,
  each running torchrun for its node's ranks;
- ``MPIJob`` (MPI Operator, kubeflow.org/v2beta1): a Launcher pod running mpirun over ``nodes``
  Worker pods with ``procs_per_node`` slots each (Horovod, ChainerMN); the Worker pods run the
  image's sshd, so an MPI image needs openssh-server;
- ``TFJob`` (Training Operator, kubeflow.org/v1): one Worker pod per rank, each handed its
  TF_CONFIG by the operator (TensorFlow's MultiWorkerMirroredStrategy); ``cpu``, ``memory``
  and ``gpus_per_node`` are then per pod, that is per rank;
- ``TrainJob`` (Kubeflow Trainer v2, trainer.kubeflow.org/v1alpha1), chosen with ``kind = "TrainJob"``:
  the same pods under a ClusterTrainingRuntime, torch-distributed or an MPI runtime
  (:mod:`harness.launchers.kubernetes.kubeflow_trainer`).

The kind is the framework's (``FrameworkInfo.kubernetes_job``) unless ``kind`` says otherwise.
With kubectl and a configured cluster, the manifest is applied and the harness waits for
the job to succeed (deleting it if the run is stopped); otherwise ``rosetta run --dry-run``
writes the manifests to apply elsewhere. The pods run the framework's image
(``FrameworkInfo.image``, built from ``docker/``) unless ``image`` names another, with the
repository at ``workdir``; the run's folder is on a volume every pod mounts at the
same path as the harness sees it (a PersistentVolumeClaim named ``results_claim``).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from harness.base import escaping
from harness.contract.spec import RunSpec
from harness.launchers import (
    LaunchCommand,
    LaunchRequest,
    framework_image,
    options,
    results_root,
    worker_argv,
    worker_env,
)
from harness.launchers.kubernetes import kubeflow_trainer

MANIFEST = "job.yaml"
RUNTIME = "runtime.yaml"  # an MPI TrainJob's ClusterTrainingRuntime (kubeflow_trainer.mpi_runtime)
CLUSTER = True  # runs on a scheduler's nodes: `reproduce --at published` sets no limit from this machine


class JobKind(str, Enum):
    AUTO = "auto"  # the framework's own (FrameworkInfo.kubernetes_job)
    PYTORCHJOB = "PyTorchJob"
    MPIJOB = "MPIJob"
    TFJOB = "TFJob"
    TRAINJOB = "TrainJob"  # Kubeflow Trainer v2 (harness.launchers.kubernetes.kubeflow_trainer), the runtime by framework


API_VERSIONS = {JobKind.PYTORCHJOB: "kubeflow.org/v1", JobKind.MPIJOB: "kubeflow.org/v2beta1",
                JobKind.TFJOB: "kubeflow.org/v1"}
# The container names and port names the operators look for in their pods.
CONTAINERS = {JobKind.PYTORCHJOB: "pytorch", JobKind.MPIJOB: "worker", JobKind.TFJOB: "tensorflow"}
PORTS = {JobKind.PYTORCHJOB: "pytorchjob-port", JobKind.TFJOB: "tfjob-port"}
SSHD = ("/usr/sbin/sshd", "-De")  # what an MPIJob's Worker pods run; the Launcher reaches them with ssh


# What the API server takes (checked here, not after a manifest is applied): a resource quantity ("8", "500m",
# "64Gi", "1e3"; ASCII digits), a DNS-1123 label (a namespace) and subdomain (a claim or runtime name: no "..").
QUANTITY = (r"(?:[0-9]{1,12}(?:\.[0-9]{1,9})?|\.[0-9]{1,9})(?:[numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,2})?",
            'a Kubernetes quantity ("8", "500m", "64Gi")')
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
LABEL = (_LABEL, "a DNS-1123 label (lower-case letters, digits, '-'; at most 63)")
SUBDOMAIN = (rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*",
             "a DNS-1123 name (lower-case labels of letters, digits and '-' joined by single dots; at most 253)")


@dataclass(frozen=True)
class Options:
    namespace: str = field(default="default", metadata={"pattern": LABEL})
    image: str = ""  # "": the framework's own (FrameworkInfo.image, built from docker/)
    workdir: str = "/opt/rosetta"  # where the image holds the repository
    python: str = "python"  # the image's interpreter
    gpus_per_node: int = field(default=0, metadata={"min": 0, "max": 64})
    cpu: str = field(default="", metadata={"pattern": (f"(?:{QUANTITY[0]})?", QUANTITY[1])})  # requests = limits
    memory: str = field(default="", metadata={"pattern": (f"(?:{QUANTITY[0]})?", QUANTITY[1])})  # e.g. "64Gi"
    node_selector: tuple[str, ...] = field(default=(), metadata={"allow_empty": True,  # "key=value"
                                                                 "pattern": (r"[^=]+=.*", "key=value")})
    results_claim: str = field(default="rosetta-results", metadata={"pattern": SUBDOMAIN})
    master_port: int = field(default=23456, metadata={"min": 1, "max": 65535})
    kind: JobKind = JobKind.AUTO
    # kind TrainJob: the ClusterTrainingRuntime; "": torch-distributed, or for MPI frameworks rosetta-mpi-<image>
    # (written beside the job as runtime.yaml)
    runtime: str = field(default="", metadata={"pattern": (f"(?:{SUBDOMAIN[0]})?", SUBDOMAIN[1])})


def job_name(request: LaunchRequest) -> str:
    """A DNS-1123 name unique per run."""
    return "rosetta-" + "-".join(request.run_dir.parts[-2:]).lower().replace("_", "-")[:50]


def job_kind(request: LaunchRequest) -> JobKind:
    """The job kind of this run: the ``kind`` option, or else the framework's declared kind."""
    import frameworks

    kind = options(request).kind
    return JobKind(frameworks.get(request.spec.framework).kubernetes_job) if kind == JobKind.AUTO else kind


def image(request: LaunchRequest) -> str:
    """The image the run's pods run: the ``image`` option, or else the framework's declared image."""
    return framework_image(request, options(request).image)


def manifest(request: LaunchRequest) -> dict[str, Any]:
    """The job manifest of the run's kind (see the module's docstring for the pods of each)."""
    spec, opts, kind = request.spec, options(request), job_kind(request)
    if kind == JobKind.TRAINJOB:
        return train_job(request)
    return {
        "apiVersion": API_VERSIONS[kind],
        "kind": kind.value,
        "metadata": {"name": job_name(request), "namespace": opts.namespace,
                     "labels": {"app.kubernetes.io/part-of": "rosetta", "rosetta/config": spec.config_id()}},
        "spec": {"runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None"}, **REPLICAS[kind](request)},
    }


def _replica(count: int, template: dict[str, Any]) -> dict[str, Any]:
    return {"replicas": count, "restartPolicy": "Never", "template": template}


def pytorchjob_replicas(request: LaunchRequest) -> dict[str, Any]:
    """One Master and nodes-1 Workers, each pod running torchrun for its node's ranks."""
    spec, opts = request.spec, options(request)
    # $(VAR) is expanded by Kubernetes from the variables the operator sets in each pod.
    argv = [opts.python, "-m", "torch.distributed.run", "--nnodes", str(spec.nodes),
            "--nproc-per-node", str(spec.procs_per_node), "--node-rank", "$(RANK)",
            "--master-addr", "$(MASTER_ADDR)", "--master-port", "$(MASTER_PORT)",
            "--no-python", opts.python, *worker_argv(request)]
    template = pod_template(request, JobKind.PYTORCHJOB, argv)
    roles = {"Master": 1, **({"Worker": spec.nodes - 1} if spec.nodes > 1 else {})}
    return {"pytorchReplicaSpecs": {role: _replica(count, template) for role, count in roles.items()}}


def mpijob_replicas(request: LaunchRequest) -> dict[str, Any]:
    """A Launcher running mpirun (the operator gives it the hostfile) over ``nodes`` sshd Workers."""
    spec, opts = request.spec, options(request)
    env = worker_env(request, _node_cpus(opts))
    argv = ["mpirun", "-np", str(spec.world_size), "--bind-to", "none", "--tag-output", "--allow-run-as-root"]
    for name in (*env, "ROSETTA_IMAGE"):
        argv += ["-x", name]
    argv += [opts.python, *worker_argv(request)]
    launcher = pod_template(request, JobKind.MPIJOB, argv, name="launcher", resources=False)
    return {"slotsPerWorker": spec.procs_per_node, "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {"Launcher": _replica(1, launcher),
                                "Worker": _replica(spec.nodes, pod_template(request, JobKind.MPIJOB, list(SSHD)))}}


def tfjob_replicas(request: LaunchRequest) -> dict[str, Any]:
    """One Worker pod per rank; the rank comes from the TF_CONFIG the operator sets (harness.contract.worker)."""
    spec, opts = request.spec, options(request)
    argv = [opts.python, *worker_argv(request)]
    return {"tfReplicaSpecs": {"Worker": _replica(spec.world_size, pod_template(request, JobKind.TFJOB, argv,
                                                                                ranks_per_pod=1))}}


REPLICAS = {JobKind.PYTORCHJOB: pytorchjob_replicas, JobKind.MPIJOB: mpijob_replicas, JobKind.TFJOB: tfjob_replicas}


def uses_mpi(request: LaunchRequest) -> bool:
    """Whether the framework's ranks are started by mpirun (its declared kind is MPIJob)."""
    import frameworks

    return kubeflow_trainer.uses_mpi(frameworks.get(request.spec.framework).kubernetes_job)


def runtime_name(request: LaunchRequest) -> str:
    """The TrainJob's ClusterTrainingRuntime: the ``runtime`` option, else Kubeflow's torch-distributed, or
    for an MPI framework Rosetta's MPI runtime for its image (the node pods run the runtime's image)."""
    chosen = options(request).runtime
    if chosen or not uses_mpi(request):
        return chosen or kubeflow_trainer.TORCH_RUNTIME
    repository = image(request).rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    slug = "".join(c if c.isalnum() else "-" for c in repository.lower()).strip("-")
    return f"{kubeflow_trainer.MPI_RUNTIME}-{slug}"[:63].rstrip("-")


def train_job(request: LaunchRequest) -> dict[str, Any]:
    """A Kubeflow Trainer v2 TrainJob: torchrun under torch-distributed's variables, or mpirun from the MPI
    runtime's launcher (the same pods as the v1 kinds: image, variables, resources, results volume)."""
    spec, opts, mpi = request.spec, options(request), uses_mpi(request)
    template = pod_template(request, JobKind.MPIJOB, [], name=kubeflow_trainer.NODE)["spec"]
    container = template["containers"][0]
    if mpi:
        argv = mpijob_replicas(request)["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    else:  # torchrun reads nodes, processes per node, node rank and rendezvous from the PET_* variables
        argv = [opts.python, "-m", "torch.distributed.run", "--no-python", opts.python, *worker_argv(request)]
    pods = kubeflow_trainer.Pods(
        name=job_name(request), namespace=opts.namespace,
        labels={"app.kubernetes.io/part-of": "rosetta", "rosetta/config": spec.config_id()},
        image=container["image"], env=container["env"], resources=container["resources"],
        volumes=template["volumes"], mounts=container["volumeMounts"], node_selector=template.get("nodeSelector", {}))
    # a trainer has no working folder of its own: env -C (coreutils) starts the command in the repository
    return kubeflow_trainer.train_job(pods, runtime_name(request), ["env", "-C", opts.workdir, *argv], spec.nodes,
                                      spec.procs_per_node, mpi)


def _node_cpus(opts: Options) -> int | None:
    return int(float(opts.cpu)) if opts.cpu.replace(".", "", 1).isdigit() else None


def pod_template(request: LaunchRequest, kind: JobKind, argv: list[str], name: str | None = None,
                 resources: bool = True, ranks_per_pod: int | None = None) -> dict[str, Any]:
    """A pod running ``argv`` in the image, with the results volume mounted where the harness sees it.

    ``resources``: request the configured CPU, memory and GPUs (not for an MPIJob's Launcher);
    ``ranks_per_pod``: ranks sharing the pod's cores (default: the run's procs_per_node).
    """
    spec, opts = request.spec, options(request)
    limits = {key: value for key, value in (("cpu", opts.cpu), ("memory", opts.memory),
              ("nvidia.com/gpu", str(opts.gpus_per_node) if opts.gpus_per_node else "")) if value and resources}
    cpus = _node_cpus(opts)
    if cpus is not None and ranks_per_pod is not None:
        cpus *= spec.procs_per_node // ranks_per_pod  # worker_env divides the cores by procs_per_node
    results_dir, image_name = str(results_root(request)), image(request)
    container = {
        "name": name or CONTAINERS[kind], "image": image_name, "imagePullPolicy": "IfNotPresent",
        "workingDir": opts.workdir, "command": argv,
        "env": [{"name": k, "value": v} for k, v in {**worker_env(request, cpus), "ROSETTA_IMAGE": image_name}.items()],
        "resources": {"requests": limits, "limits": dict(limits)} if limits else {},
        "volumeMounts": [{"name": "results", "mountPath": results_dir}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if kind in PORTS:
        container["ports"] = [{"name": PORTS[kind], "containerPort": opts.master_port}]
    pod: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "results", "persistentVolumeClaim": {"claimName": opts.results_claim}},
                    {"name": "dshm", "emptyDir": {"medium": "Memory"}}],  # NCCL and DataLoader need a big /dev/shm
    }
    if opts.node_selector:
        pod["nodeSelector"] = dict(item.split("=", 1) for item in opts.node_selector)
    return {"metadata": {"labels": {"app.kubernetes.io/part-of": "rosetta"}}, "spec": pod}


def command(request: LaunchRequest) -> LaunchCommand:
    """Apply the manifest (and an MPI TrainJob's runtime), then wait for the job's Succeeded condition
    (a TrainJob's: Complete); the run's timeout bounds the wait."""
    spec, opts, kind = request.spec, options(request), job_kind(request)
    files = {MANIFEST: escaping.yaml_document(manifest(request))}
    if kind == JobKind.TRAINJOB and uses_mpi(request) and not opts.runtime:
        files[RUNTIME] = escaping.yaml_document(kubeflow_trainer.mpi_runtime(runtime_name(request), image(request)))
    applied = [a for name in sorted(files, key=lambda f: f != RUNTIME) for a in ("-f", str(request.run_dir / name))]
    target = (kind.value.lower(), job_name(request), "--namespace", opts.namespace)
    done = "Complete" if kind == JobKind.TRAINJOB else "Succeeded"
    return LaunchCommand(
        ("kubectl", "wait", f"--for=condition={done}", f"--timeout={int(spec.timeout_s)}s", *target),
        files=files, setup=(("kubectl", "apply", *applied),),
        abort=(("kubectl", "delete", "--ignore-not-found", *target),))


@functools.lru_cache(maxsize=1)
def _cluster_configured() -> bool:
    if shutil.which("kubectl") is None:
        return False
    try:
        return subprocess.run(["kubectl", "config", "current-context"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def unsupported_reason(spec: RunSpec) -> str | None:
    if not _cluster_configured():
        return "no Kubernetes cluster configured for kubectl (rosetta run --dry-run writes the manifests)"
    return None
