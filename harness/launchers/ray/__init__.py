"""Ray: a run's ranks on a Ray cluster the user names, one Ray actor per rank with its resources.

``python -m harness.launchers.ray.driver MODULE SPEC`` (beside this module) connects to the cluster at
``address``, reserves one placement-group bundle per node (``nodes`` bundles spread over distinct Ray
nodes, each ``procs_per_node`` x the rank's CPUs and GPUs), starts an actor per rank in its node's
bundle, asks each where it landed (address, network interface, GPUs, free ports) and gives each rank
the environment its framework meets by, as its Kubernetes kind would (``FrameworkInfo.kubernetes_job``):

- PyTorchJob (torch_ddp): torch.distributed's variables, MASTER_ADDR/MASTER_PORT on rank 0's node;
- TFJob (tf_mwms): TF_CONFIG, every worker's address and a free port on its node (as Ray Train's
  TensorflowTrainer does); a parameter-server run meets in the run's folder instead;
- MPIJob (Horovod): Horovod's Gloo rendezvous, as horovodrun --gloo sets it (a rendezvous server in
  the driver, HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, HOROVOD_RANK, ...). ChainerMN needs MPI, which Ray
  does not start: it does not declare ray.

Each actor runs ``python -m harness.contract.worker MODULE SPEC`` in the repository (``workdir``) with
the interpreter ``python`` (both: this machine's paths unless named, so the nodes need them at the same
paths, as SLURM does; or an image that holds them, on KubeRay). The rank records go into the run's
folder where the nodes see it (``run_folder`` shared); where they do not (another machine's disk),
each actor writes them in a folder of its own and the driver gathers them into the run's folder
(``gathered``; ``auto`` asks the nodes).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from enum import Enum

from harness.contract.spec import RunSpec
from harness.launchers import LaunchCommand, LaunchRequest, worker_argv

CLUSTER = True  # runs on a scheduler's nodes: `reproduce --at published` sets no limit from this machine


class RunFolder(str, Enum):
    AUTO = "auto"  # shared if every node sees the driver's run folder, else gathered
    SHARED = "shared"  # the nodes write the records into the run's folder (one machine, shared storage)
    GATHERED = "gathered"  # each rank writes into a folder of its own; the driver copies them back


@dataclass(frozen=True)
class Options:
    # host:6379 (the head's GCS), ray://host:10001 (Ray Client), auto (RAY_ADDRESS, or the cluster of this node)
    address: str = "auto"
    cpus_per_rank: int = field(default=1, metadata={"min": 0, "max": 1024})
    gpus_per_rank: int = field(default=0, metadata={"min": 0, "max": 16})
    python: str = ""  # the nodes' interpreter; "": the harness's own path
    workdir: str = ""  # the repository on the nodes; "": this one's path
    run_folder: RunFolder = RunFolder.AUTO
    network_interface: str = ""  # gloo's and Horovod's; "": the interface holding the node's Ray address
    placement_timeout_s: int = field(default=120, metadata={"min": 1, "max": 3600})  # for the cluster to have room


def command(request: LaunchRequest) -> LaunchCommand:
    """``python -m harness.launchers.ray.driver MODULE SPEC``: the driver stays for the run, its exit status
    the ranks' (the first that failed); stopping it stops the ranks (their actors are killed)."""
    argv = (request.python, "-m", "harness.launchers.ray.driver", *worker_argv(request)[2:])
    return LaunchCommand(argv, {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"})


def unsupported_reason(spec: RunSpec) -> str | None:
    import frameworks

    if importlib.util.find_spec("ray") is None:
        return "ray not installed (pip install -e '.[engines]')"
    if spec.network != "unlimited":
        return "network caps are applied only between network-namespace hosts (use mpirun or torchrun)"
    if frameworks.get(spec.framework).kubernetes_job == "MPIJob" and importlib.util.find_spec("horovod") is None:
        return "horovod not installed here: the driver serves Horovod's Gloo rendezvous"
    return None
