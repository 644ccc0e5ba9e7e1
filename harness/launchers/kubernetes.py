"""Kubernetes: a Kubeflow Training Operator manifest per run (PyTorchJob for PyTorch frameworks).

With kubectl and a configured cluster, the manifest is applied and the harness waits for
the job to succeed (deleting it if the run is stopped); otherwise ``rosetta run --dry-run``
writes the manifests to apply elsewhere. The pods run the image built from ``docker/``
with the repository at ``workdir``; the run's folder is on a volume every pod mounts at the
same path as the harness sees it (a PersistentVolumeClaim named ``results_claim``).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

import yaml

from harness.launchers import LaunchCommand, LaunchRequest, options, results_root, worker_argv, worker_env
from harness.spec import RunSpec

MANIFEST = "job.yaml"
API_VERSION = "kubeflow.org/v1"
CONTAINER = "pytorch"  # the container name the operator expects in a PyTorchJob


@dataclass(frozen=True)
class Options:
    namespace: str = "default"
    image: str = "rosetta/torch:latest"  # built from docker/torch.Dockerfile
    workdir: str = "/opt/rosetta"  # where the image holds the repository
    python: str = "python"  # the image's interpreter
    gpus_per_node: int = field(default=0, metadata={"min": 0})
    cpu: str = ""  # e.g. "8": requests and limits per pod
    memory: str = ""  # e.g. "64Gi"
    node_selector: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})  # "key=value"
    results_claim: str = "rosetta-results"
    master_port: int = field(default=23456, metadata={"min": 1, "max": 65535})


def job_name(request: LaunchRequest) -> str:
    """A DNS-1123 name unique per run."""
    return "rosetta-" + "-".join(request.run_dir.parts[-2:]).lower().replace("_", "-")[:50]


def manifest(request: LaunchRequest) -> dict[str, Any]:
    """The PyTorchJob: one Master pod and nodes-1 Worker pods, each running torchrun."""
    spec, opts = request.spec, options(request)
    replicas = {"Master": 1, **({"Worker": spec.nodes - 1} if spec.nodes > 1 else {})}
    return {
        "apiVersion": API_VERSION,
        "kind": "PyTorchJob",
        "metadata": {"name": job_name(request), "namespace": opts.namespace,
                     "labels": {"app.kubernetes.io/part-of": "rosetta", "rosetta/config": spec.config_id()}},
        "spec": {
            "runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {role: {"replicas": count, "restartPolicy": "Never",
                                           "template": pod_template(request)}
                                    for role, count in replicas.items()},
        },
    }


def pod_template(request: LaunchRequest) -> dict[str, Any]:
    spec, opts = request.spec, options(request)
    # $(VAR) is expanded by Kubernetes from the variables the operator sets in each pod.
    argv = [opts.python, "-m", "torch.distributed.run", "--nnodes", str(spec.nodes),
            "--nproc-per-node", str(spec.procs_per_node), "--node-rank", "$(RANK)",
            "--master-addr", "$(MASTER_ADDR)", "--master-port", "$(MASTER_PORT)",
            "--no-python", opts.python, *worker_argv(request)]
    resources: dict[str, dict[str, str]] = {}
    for key, value in (("cpu", opts.cpu), ("memory", opts.memory),
                       ("nvidia.com/gpu", str(opts.gpus_per_node) if opts.gpus_per_node else "")):
        if value:
            resources.setdefault("requests", {})[key] = value
            resources.setdefault("limits", {})[key] = value
    results_dir = str(results_root(request))
    node_cpus = int(float(opts.cpu)) if opts.cpu.replace(".", "", 1).isdigit() else None
    container = {
        "name": CONTAINER, "image": opts.image, "imagePullPolicy": "IfNotPresent", "workingDir": opts.workdir,
        "command": argv,
        "env": [{"name": k, "value": v} for k, v in {**worker_env(request, node_cpus), "ROSETTA_IMAGE": opts.image}.items()],
        "resources": resources,
        "ports": [{"name": "pytorchjob-port", "containerPort": opts.master_port}],
        "volumeMounts": [{"name": "results", "mountPath": results_dir}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "results", "persistentVolumeClaim": {"claimName": opts.results_claim}},
                    {"name": "dshm", "emptyDir": {"medium": "Memory"}}],  # NCCL and DataLoader need a big /dev/shm
    }
    if opts.node_selector:
        pod["nodeSelector"] = dict(item.split("=", 1) for item in opts.node_selector)
    return {"metadata": {"labels": {"app.kubernetes.io/part-of": "rosetta"}}, "spec": pod}


def command(request: LaunchRequest) -> LaunchCommand:
    """Apply the manifest, then wait for the job's Succeeded condition (the run's timeout bounds it)."""
    spec, opts = request.spec, options(request)
    path, name = str(request.run_dir / MANIFEST), job_name(request)
    target = ("pytorchjob", name, "--namespace", opts.namespace)
    return LaunchCommand(
        ("kubectl", "wait", "--for=condition=Succeeded", f"--timeout={int(spec.timeout_s)}s", *target),
        files={MANIFEST: yaml.safe_dump(manifest(request), sort_keys=False)},
        setup=(("kubectl", "apply", "-f", path),),
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
