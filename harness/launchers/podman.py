"""Podman: the ranks in containers of the framework's image on this machine, one container per rank.

The containers share the host's network (``--network host``), so the ranks meet as processes on one
machine do: torch.distributed-style variables (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT)
that ``harness.contract.worker`` and the frameworks read (PyTorch DDP's gloo, TensorFlow's TF_CONFIG made
through the run's folder). The results folder is mounted at the path the harness sees, so the spec goes in
and each rank's records come out as with any launcher; with ``mount_repository`` (the default) this
checkout is mounted over the image's ``/opt/rosetta`` (the image brings the environment, the code is the
code under test, and the row's commit says which). The MPI frameworks (Horovod, ChainerMN) run their own
launcher (mpirun, horovodrun) in one container that holds all their ranks (``FrameworkInfo.container_per_rank``
says which way a framework goes).

The image is ``image``, else the framework's declared one (``FrameworkInfo.image``, as the kubernetes and
slurm launchers run; tools/container_images.py builds the CPU variants without a registry). The run is pinned
to the image's ID, looked up when the command is made and written to the run's ``image.json``: the row's
``image``, ``image_id`` and ``image_digest`` (a failed run's reason names the image too).
Podman runs with ``tools/containers.conf`` (``CONTAINERS_CONF``) unless the environment names another.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from harness.base.network import free_port
from harness.contract.events import HOST_VARIABLE, IMAGE_FILE, IMAGE_VARIABLE
from harness.contract.spec import RunSpec
from harness.launchers import (
    LaunchCommand,
    LaunchRequest,
    framework_image,
    get,
    options,
    results_root,
    worker_argv,
    worker_env,
)

# runc, cgroupfs and limits root may set (the machines the project is developed on: see the file)
CONTAINERS_CONF = Path(__file__).resolve().parents[2] / "tools" / "containers.conf"
# The framework's environment is the image's: the harness's own lacking a framework does not skip the run.
IN_IMAGE = True


@dataclass(frozen=True)
class Options:
    image: str = ""  # "": the framework's own (FrameworkInfo.image)
    mount_repository: bool = True  # this checkout over the image's workdir (False: the code baked in)
    workdir: str = "/opt/rosetta"  # where the image holds the repository
    python: str = "python"  # the image's interpreter
    master_port: int = field(default=0, metadata={"min": 0, "max": 65535})  # 0: a free one, found per run
    extra_args: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})  # e.g. ["--cpus", "1"]


def container_name(request: LaunchRequest, rank: int) -> str:
    """Unique per run and rank, so that ``podman rm -f`` stops this run's containers and no other."""
    return "rosetta-" + "-".join(request.run_dir.parts[-2:]) + f"-r{rank}"


def inspect(image: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The local image's ID (as ``sha256:HEX``) and digest (``podman image inspect``); empty if podman
    does not have it or is not installed here (a dry run writes the commands all the same)."""
    try:
        done = subprocess.run(["podman", "image", "inspect", "--format", "{{json .}}", image], capture_output=True,
                              text=True, env=env or podman_env(), stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return {}
    if done.returncode != 0:
        return {}
    facts = json.loads(done.stdout)
    facts = facts[0] if isinstance(facts, list) else facts
    return {"id": "sha256:" + facts["Id"].removeprefix("sha256:"), "digest": facts.get("Digest", "")}


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF") or str(CONTAINERS_CONF)}


def container_argv(request: LaunchRequest, name: str, env: dict[str, str], image_facts: dict[str, str],
                   argv: Sequence[str]) -> tuple[str, ...]:
    """``podman run`` of ``argv``: host network, the results (and repository) mounted, ``env`` set."""
    opts = options(request)
    image = framework_image(request, opts.image)
    results = str(results_root(request))
    mounts = [f"{results}:{results}"]
    if opts.mount_repository:
        mounts.append(f"{request.repo_root.resolve()}:{opts.workdir}")
    env = {**env, IMAGE_VARIABLE: image}
    # --init: Python as PID 1 would ignore the SIGTERM a stopped run sends; --rm: nothing left behind;
    # --shm-size: Open MPI's shared-memory transport between the ranks of one container.
    return ("podman", "run", "--rm", "--init", "--network", "host", "--shm-size", "1g", "--name", name,
            "--workdir", opts.workdir, *(a for m in mounts for a in ("--volume", m)),
            *(a for k, v in env.items() for a in ("--env", f"{k}={v}")),
            *opts.extra_args, image_facts.get("id", image).removeprefix("sha256:"), *argv)


def rank_argv(request: LaunchRequest, rank: int, image_facts: dict[str, str], port: int) -> tuple[str, ...]:
    """One rank's container, with the rank's torch.distributed-style variables."""
    name = container_name(request, rank)
    env = {**worker_env(request), "RANK": str(rank), "WORLD_SIZE": str(request.spec.world_size), "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), HOST_VARIABLE: name}
    return container_argv(request, name, env, image_facts, (options(request).python, *worker_argv(request)))


def inner_command(request: LaunchRequest) -> LaunchCommand:
    """The framework's own launcher's command as it runs inside the image (its Python, its repository)."""
    import frameworks  # noqa: PLC0415 (frameworks' declarations import harness.contract, which is below)

    default = frameworks.get(request.spec.framework).launcher
    spec = dataclasses.replace(request.spec, launcher=default, launcher_options={})
    inner = dataclasses.replace(request, spec=spec, python=options(request).python,
                                repo_root=Path(options(request).workdir))
    return get(default)(inner)


def command(request: LaunchRequest) -> LaunchCommand:
    """Rank 0's container as the launch, the others beside it; ``abort`` removes them all."""
    import frameworks  # noqa: PLC0415 (frameworks' declarations import harness.contract, which is below)

    env = podman_env()
    facts = inspect(framework_image(request, options(request).image), env)
    if frameworks.get(request.spec.framework).container_per_rank:
        port = options(request).master_port or free_port()
        argvs = [rank_argv(request, rank, facts, port) for rank in range(request.spec.world_size)]
        names = [container_name(request, rank) for rank in range(request.spec.world_size)]
    else:
        inner, names = inner_command(request), [container_name(request, 0)]
        argvs = [container_argv(request, names[0], dict(inner.env), facts, inner.argv)]
    record = json.dumps({"image": framework_image(request, options(request).image), **facts})
    return LaunchCommand(argvs[0], {"CONTAINERS_CONF": env["CONTAINERS_CONF"]}, files={IMAGE_FILE: record},
                         also=tuple(argvs[1:]),
                         abort=(("podman", "rm", "--force", "--time", "0", "--ignore", *names),))


def unsupported_reason(spec: RunSpec) -> str | None:
    if shutil.which("podman") is None:
        return "podman not found (apt-get install podman runc; see docs/clusters.md)"
    if os.geteuid() != 0:
        return "the podman launcher runs containers as root here (rootless podman is not set up)"
    if spec.nodes > 1:
        return "the podman launcher runs on this machine: nodes = 1 (procs_per_node containers)"
    image = framework_image(spec, options(spec).image)
    if not inspect(image):
        return f"image {image} not here (build it: python tools/container_images.py build, docker/README.md)"
    return None
