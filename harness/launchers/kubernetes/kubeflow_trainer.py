"""Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1): a ``TrainJob`` per run, referencing a
``ClusterTrainingRuntime``; the kubernetes launcher writes it with ``kind = "TrainJob"``.

The runtime is the framework's way of starting ranks (``FrameworkInfo.kubernetes_job``):

- PyTorchJob frameworks (torch_ddp): Kubeflow's ``torch-distributed`` runtime; its torch policy sets
  torchrun's ``PET_*`` variables (nodes, processes per node, node rank, rendezvous) in every node's
  pod, so the trainer runs ``torchrun --no-python python -m harness.contract.worker ...``;
- MPIJob frameworks (Horovod, ChainerMN): an MPI runtime (``rosetta-mpi`` unless ``runtime`` names
  another), written beside the job as ``runtime.yaml``: sshd on the node pods, ``mpirun`` from a
  launcher pod over the hostfile the MPI policy writes, as the v1 MPIJob does;
- TFJob frameworks (tf_mwms): Trainer v2 has no TensorFlow runtime (TFJob is a v1 kind only). Its
  workers build their TF_CONFIG by meeting in the run's folder (frameworks/tf_mwms/cluster.py), so they
  run under ``torch-distributed`` with torchrun as a plain process launcher, as they do under torchrun here.

The pods mount the results claim where the harness sees the results (``runtimePatches``, the v2 way
of adding volumes to a runtime's pods).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

API_VERSION = "trainer.kubeflow.org/v1alpha1"
TORCH_RUNTIME = "torch-distributed"  # Kubeflow's own (manifests/base/runtimes/torch_distributed.yaml)
MPI_RUNTIME = "rosetta-mpi"  # ours, written beside the job (runtime.yaml)
PATCH_MANAGER = "rosetta.io/launcher"  # who owns the runtime patch (a TrainJob's patches are keyed by manager)
NODE = "node"  # the runtimes' replicated job and container that train
LAUNCHER = "launcher"  # the MPI runtime's replicated job that runs mpirun
SSH_PATH = "/root/.ssh"  # where the MPI policy mounts the generated ssh keys (the images run as root)


@dataclass(frozen=True)
class Pods:
    """What every pod of the job gets, from the kubernetes launcher's options."""

    name: str
    namespace: str
    labels: dict[str, str]
    image: str
    env: list[dict[str, str]]
    resources: dict[str, Any]
    volumes: list[dict[str, Any]]
    mounts: list[dict[str, Any]]
    node_selector: dict[str, str]


def uses_mpi(kubernetes_job: str) -> bool:
    return kubernetes_job == "MPIJob"


def train_job(pods: Pods, runtime: str, command: list[str], nodes: int, procs_per_node: int,
              mpi: bool) -> dict[str, Any]:
    """The TrainJob: the runtime, the trainer (image, command, nodes, processes per node, resources,
    variables) and one patch adding the results volume to the runtime's pods."""
    trainer: dict[str, Any] = {"image": pods.image, "command": command, "numNodes": nodes,
                               "numProcPerNode": procs_per_node, "env": pods.env}
    if pods.resources:
        trainer["resourcesPerNode"] = pods.resources
    jobs = [NODE, LAUNCHER] if mpi else [NODE]
    patch = {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": job, "template": {"spec": {"template": {"spec": _pod_patch(pods)}}}} for job in jobs]}}}}
    return {"apiVersion": API_VERSION, "kind": "TrainJob",
            "metadata": {"name": pods.name, "namespace": pods.namespace, "labels": pods.labels},
            "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                    "name": runtime},
                     "trainer": trainer, "runtimePatches": [patch]}}


def _pod_patch(pods: Pods) -> dict[str, Any]:
    """What a runtime's pod gets added: the volumes, their mounts in the training container, the node
    selector (a fresh copy per pod: the manifest is written without YAML anchors)."""
    pod: dict[str, Any] = {"volumes": copy.deepcopy(pods.volumes),
                           "containers": [{"name": NODE, "volumeMounts": copy.deepcopy(pods.mounts)}]}
    if pods.node_selector:
        pod["nodeSelector"] = dict(pods.node_selector)
    return pod


def mpi_runtime(name: str, image: str) -> dict[str, Any]:
    """A ClusterTrainingRuntime with the MPI policy (Open MPI): node pods running sshd, a launcher pod
    (the trainer: the TrainJob's command, mpirun) started once they are ready; as Kubeflow's own MPI
    runtimes (deepspeed-distributed) are made, with the images' root user."""
    def container(argv: list[str]) -> dict[str, Any]:
        return {"name": NODE, "image": image, "command": argv}

    node = {"name": NODE, "template": {"spec": {"template": {"spec": {
        "containers": [{**container(["/usr/sbin/sshd", "-De"]),
                        "readinessProbe": {"tcpSocket": {"port": 22}, "initialDelaySeconds": 2}}]}}}}}
    launcher = {"name": LAUNCHER, "dependsOn": [{"name": NODE, "status": "Ready"}],
                "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                             "spec": {"template": {"spec": {"containers": [container(["mpirun"])]}}}}}
    return {"apiVersion": API_VERSION, "kind": "ClusterTrainingRuntime",
            "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "mpi",
                                                  "app.kubernetes.io/part-of": "rosetta"}},
            "spec": {"mlPolicy": {"numNodes": 1, "mpi": {"numProcPerNode": 1, "mpiImplementation": "OpenMPI",
                                                         "sshAuthMountPath": SSH_PATH, "runLauncherAsNode": False}},
                     "template": {"spec": {"network": {"publishNotReadyAddresses": True},
                                           "successPolicy": {"operator": "All", "targetReplicatedJobs": [LAUNCHER]},
                                           "replicatedJobs": [node, launcher]}}}}
