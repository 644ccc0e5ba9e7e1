"""torchrun (torch.distributed.run): one node standalone, or several hosts with c10d rendezvous."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from harness.contract.events import HOST_VARIABLE
from harness.contract.spec import RunSpec
from harness.launchers import (
    LaunchCommand,
    LaunchRequest,
    hosts as host_list,
    options,
    remote_argv,
    worker_argv,
    worker_env,
)
from harness.launchers.hosts import RemoteShell


# reaches network-namespace hosts (remote = "netns"); the number orders them in the emulated cluster's
# launcher options (a framework's ranks take its first launcher that reaches them)
# (torchrun's rendezvous)
NETNS_PREFERENCE = 1


@dataclass(frozen=True)
class Options:
    """Multi-node settings; with no ``hosts`` every run stays on this machine."""

    hosts: tuple[str, ...] = field(default=(), metadata=host_list.HOST_FIELD)  # ssh names or netns names
    addresses: tuple[str, ...] = field(default=(), metadata=host_list.HOST_FIELD)  # for rendezvous
    remote: RemoteShell = RemoteShell.SSH
    rendezvous_port: int = field(default=29400, metadata={"min": 1, "max": 65535})
    interface: str = "eth0"  # the hosts' network interface (sockets of gloo/NCCL, network caps)


def command(request: LaunchRequest) -> LaunchCommand:
    """``python -m torch.distributed.run ... -m harness.contract.worker MODULE SPEC``, once per node.

    ``python -m torch.distributed.run`` is the ``torchrun`` console script, run with the
    same interpreter as the harness so the workers see the same environment.
    """
    spec, opts = request.spec, options(request)
    env = worker_env(request, host_list.node_cpus(opts.remote, spec, request.cpu_count) if opts.hosts else None)
    tail = ["--nproc-per-node", str(spec.procs_per_node), "--no-python", request.rank_python, *worker_argv(request)]
    if spec.nodes == 1 and not opts.hosts:
        argv = (request.python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", *tail)
        return LaunchCommand(argv, env)
    env.update(GLOO_SOCKET_IFNAME=opts.interface, NCCL_SOCKET_IFNAME=opts.interface)
    addresses = host_list.addresses(opts.hosts, opts.addresses)
    endpoint = f"{addresses[0]}:{opts.rendezvous_port}"

    def node_argv(node: int) -> tuple[str, ...]:
        # is_host (the first node serves the rendezvous store) and local-addr (what the others dial)
        # are explicit: torchrun would derive both from host names, which fails where hosts share
        # one (network namespaces, some container setups).
        return (request.python, "-m", "torch.distributed.run", "--nnodes", str(spec.nodes),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", spec.config_id(),
                "--rdzv-conf", f"is_host={str(node == 0).lower()}", "--local-addr", addresses[node],
                "--max-restarts", "0", *tail)

    per_host = [remote_argv(host_list.prefix(opts.remote, host), request.repo_root, {**env, HOST_VARIABLE: host},
                            node_argv(node))
                for node, host in enumerate(opts.hosts[: spec.nodes])]
    return LaunchCommand(per_host[0], env, setup=host_list.shaping(spec, opts.hosts, opts.remote, opts.interface),
                         also=tuple(per_host[1:]))


def unsupported_reason(spec: RunSpec) -> str | None:
    opts = options(spec)
    reason = (host_list.oversubscribed(spec, opts.hosts)
              or host_list.check(spec, opts.hosts, opts.addresses, opts.remote, "torchrun"))
    if reason is None and opts.remote == RemoteShell.NETNS and shutil.which("ip") is None:
        reason = "remote = \"netns\" needs the ip command (iproute2)"
    return reason
