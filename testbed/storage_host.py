"""A storage host behind a capped link: a network namespace of its own joined to this machine's (the
root namespace) by one veth pair, the link capped in both directions with tc's tbf (the ``network``
axis's values and shaping, harness/base/network.py), so that "NFS over a shared 10 Gbit link" is
emulated on one machine.

The servers of testbed/servers.py start in it when given ``host=`` (``ip netns exec``, bound to
the host's address); clients in the root namespace reach them at that address, every byte through the
cap. Addresses are a free /30 of 10.213.9.0/24 (root side .4k+1, storage side .4k+2); nothing else is
attached to the pair, so no traffic leaves the machine. Names carry this process's id
(``rosetta-stor-<pid>-<k>``), never colliding with tools/netns_hosts.sh's ``rosetta-h<i>`` hosts nor
with another session's storage hosts. Needs root and iproute2.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass

from harness.base import network

PREFIX = "rosetta-stor-"
SUBNET = ipaddress.ip_network("10.213.9.0/24")  # beside netns_hosts.sh's 10.213.8.0/24
LOCK = "/run/rosetta-storage-host.lock"  # two sessions choosing a /30 at once would both take the same
_NAME = re.compile(rf"^{PREFIX}(?P<pid>\d+)-(?P<k>\d+)$")


class Unavailable(RuntimeError):
    """A server or a storage host could not be started here; the message says why (testbed/servers.py
    raises it too; the tests turn it into a skip)."""


@dataclass(frozen=True)
class StorageHost:
    """A running storage host: its namespace, its address (where its servers listen), the root side's
    address and the root side's interface."""

    name: str  # the network namespace
    address: str  # the storage side, e.g. 10.213.9.2
    root_address: str  # the root namespace's end of the link, e.g. 10.213.9.1
    root_interface: str  # the veth end in the root namespace

    def exec_prefix(self) -> tuple[str, ...]:
        """What runs a command inside the host (it execs: the pid stays the command's)."""
        return ("ip", "netns", "exec", self.name)

    def cap(self, rate: str) -> None:
        """Set the link's cap in both directions: ``unlimited`` or a rate like ``100mbit`` (bits/s)."""
        _run(network.shaping_argv(self.root_interface, rate))  # root -> storage (writes, requests)
        _run(self.exec_prefix() + network.shaping_argv("eth0", rate))  # storage -> root (reads)


def _run(argv) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise Unavailable(f"{' '.join(argv)} failed: {done.stderr.strip()[-300:]}")
    return done.stdout


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _run(("ip", "netns", "list")).splitlines() if line.strip()]


def _remove_stale() -> None:
    """Storage hosts whose process is gone (a run that was killed): they hold addresses."""
    for name in _namespaces():
        match = _NAME.match(name)
        if match and not os.path.exists(f"/proc/{match['pid']}"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def _free_slot() -> int:
    """The first /30 of SUBNET whose root-side address no interface here holds."""
    used = _run(("ip", "-o", "-4", "addr", "show"))
    for k in range(SUBNET.num_addresses // 4):
        if f" {SUBNET[4 * k + 1]}/" not in used:
            return k
    raise Unavailable(f"every /30 of {SUBNET} is in use")


@contextmanager
def storage_host(rate: str = network.UNLIMITED):
    """A storage host whose link is capped at ``rate`` both ways; removed (with its link) afterwards.
    Stop the servers in it first (they are stopped by pid; a process left inside keeps it alive).
    Raises :class:`Unavailable` when not root or without iproute2."""
    network.bits_per_s(rate)  # a bad value fails here, before anything is made
    if os.geteuid() != 0:
        raise Unavailable("a storage host (a network namespace) needs root")
    if not (shutil.which("ip") and shutil.which("tc")):
        raise Unavailable("a storage host needs iproute2 (ip, tc)")
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed: the address is taken by then
        _remove_stale()
        k = _free_slot()
        name, root_if = f"{PREFIX}{os.getpid()}-{k}", f"rs{k}p{os.getpid()}"[:15]
        host = StorageHost(name, str(SUBNET[4 * k + 2]), str(SUBNET[4 * k + 1]), root_if)
        try:
            _make(host)
        except Unavailable:
            _remove(host)
            raise
    try:
        host.cap(rate)  # inside the try: a failing tc still removes the host
        yield host
    finally:
        _remove(host)


def _make(host: StorageHost) -> None:
    """The namespace, the veth pair between it and here, their addresses; uncapped."""
    name, root_if = host.name, host.root_interface
    _run(("ip", "netns", "add", name))
    _run(("ip", "link", "add", root_if, "type", "veth", "peer", "name", "eth0", "netns", name))
    _run(("ip", "addr", "add", f"{host.root_address}/30", "dev", root_if))
    _run(("ip", "link", "set", root_if, "up"))
    _run(("ip", "-n", name, "addr", "add", f"{host.address}/30", "dev", "eth0"))
    _run(("ip", "-n", name, "link", "set", "eth0", "up"))
    _run(("ip", "-n", name, "link", "set", "lo", "up"))  # servers' own sockets (filer, gRPC) need it


def _remove(host: StorageHost) -> None:
    # the root end first: removing it removes the pair even if a straggler keeps the namespace alive
    subprocess.run(["ip", "link", "del", host.root_interface], capture_output=True, timeout=30)
    subprocess.run(["ip", "netns", "del", host.name], capture_output=True, timeout=30)
