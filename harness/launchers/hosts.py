"""Hosts of a multi-node launch and how to reach them: ssh on clusters, ``ip netns exec`` for the
network-namespace hosts this machine can make (``tools/netns_hosts.py``)."""

from __future__ import annotations

from enum import Enum

from harness import network
from harness.spec import RunSpec


class RemoteShell(str, Enum):
    SSH = "ssh"
    NETNS = "netns"


def prefix(remote: RemoteShell, host: str) -> tuple[str, ...]:
    """The argv prefix that runs a command on ``host``."""
    if remote == RemoteShell.NETNS:
        return ("ip", "netns", "exec", host)
    return ("ssh", "-o", "BatchMode=yes", host)


def addresses(hosts: tuple[str, ...], given: tuple[str, ...]) -> tuple[str, ...]:
    """Each host's address for rendezvous: as given, else the host name itself."""
    return given or hosts


def check(spec: RunSpec, hosts: tuple[str, ...], given_addresses: tuple[str, ...], remote: RemoteShell,
          launcher: str) -> str | None:
    """Why ``hosts`` cannot carry ``spec``, or None."""
    if spec.nodes > 1 and len(hosts) < spec.nodes:
        return (f"{spec.nodes} nodes but [launcher_options.{launcher}] hosts names {len(hosts)}"
                if hosts else f"{spec.nodes} nodes: set [launcher_options.{launcher}] hosts")
    if given_addresses and len(given_addresses) != len(hosts):
        return f"[launcher_options.{launcher}] addresses must name one address per host"
    if spec.network != network.UNLIMITED and (remote != RemoteShell.NETNS or spec.nodes < 2):
        return "network caps are applied only between network-namespace hosts (remote = \"netns\", nodes >= 2)"
    return None


def shaping(spec: RunSpec, hosts: tuple[str, ...], remote: RemoteShell, interface: str) -> tuple[tuple[str, ...], ...]:
    """Commands that set each used host's link to the run's ``network`` value (netns hosts only)."""
    if remote != RemoteShell.NETNS or spec.nodes < 2:
        return ()
    return tuple((*prefix(remote, host), *network.shaping_argv(interface, spec.network))
                 for host in hosts[: spec.nodes])
