"""Hosts of a multi-node launch and how to reach them: ssh on clusters, ``ip netns exec`` for the
network-namespace hosts this machine can make (``tools/netns_hosts.py``), or ``srun`` inside a SLURM job that
spans the nodes (each host's command one step of the job, on that node)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path

from harness.base import escaping, network
from harness.base.errors import UserError
from harness.contract.spec import RunSpec
from harness.machines import emulated_cluster

NETNS_DIR = Path("/run/netns")  # where ip netns keeps the named namespaces
# runs a command in a namespace host, as ssh would on a cluster (Open MPI's daemons, horovodrun's ranks)
NETNS_AGENT = "tools/netns_rsh.sh"


# A host as a launcher may name it (ssh, mpirun's --host, horovodrun's -H, a rendezvous address): an RFC 1123
# name (labels of letters, digits and inner hyphens, at most 63 each, 253 in all), an IPv4 address (those
# are names by this grammar too) or an IPv6 address (hex digits and colons, an optional %zone). None starts
# with "-", so none can be read as an option; none holds "," or ":" where a host list separates entries.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOST_NAME = rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?|(?=[0-9A-Fa-f:.]*:)[0-9A-Fa-f:.]{{2,45}}(?:%[A-Za-z0-9_.]{{1,16}})?"
HOST_FIELD = {"allow_empty": True, "pattern": (HOST_NAME, "a host name (RFC 1123) or an IPv4/IPv6 address")}


class RemoteShell(str, Enum):
    SSH = "ssh"
    NETNS = "netns"
    SRUN = "srun"  # a step of the SLURM job this harness runs in (salloc --nodes=N ...), on the named node


def prefix(remote: RemoteShell, host: str) -> tuple[str, ...]:
    """The argv prefix that runs a command on ``host``."""
    if remote == RemoteShell.NETNS:
        return ("ip", "netns", "exec", host)
    if remote == RemoteShell.SRUN:
        # one task on that node; --overlap: the steps of a launch (and a probe after another) share the job's
        # CPUs rather than wait for each other's
        return ("srun", "--nodes=1", "--ntasks=1", f"--nodelist={host}", "--overlap", "--kill-on-bad-exit=1")
    return ("ssh", "-o", "BatchMode=yes", "--", host)  # "--": nothing after it is an option of ssh


def job_nodes() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The nodes of the SLURM job this process runs in and each one's address (``scontrol``'s NodeAddr), or a
    one-line error outside a job."""
    if not os.environ.get("SLURM_JOB_ID") or not shutil.which("scontrol"):
        raise UserError("remote = srun: not inside a SLURM job (run under salloc --nodes=N, or in an sbatch script)")
    listed = _scontrol("show", "hostnames", os.environ.get("SLURM_JOB_NODELIST", ""))
    names = tuple(listed.split())
    shown = _scontrol("show", "node", "--oneliner", ",".join(names))
    addresses = dict(_node_address(line) for line in shown.splitlines() if "NodeName=" in line)
    return names, tuple(addresses.get(n, n) for n in names)


def _scontrol(*args: str) -> str:
    done = subprocess.run(["scontrol", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"scontrol {' '.join(args)}: {(done.stderr or done.stdout).strip()[-200:]}")
    return done.stdout


def _node_address(line: str) -> tuple[str, str]:
    fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
    return fields.get("NodeName", ""), fields.get("NodeAddr") or fields.get("NodeName", "")


def node_cpus(remote: RemoteShell, spec: RunSpec, cpu_count: int) -> int | None:
    """Cores of each node where the harness knows them: namespace hosts share this machine's."""
    return max(1, cpu_count // spec.nodes) if remote == RemoteShell.NETNS else None


def addresses(hosts: tuple[str, ...], given: tuple[str, ...]) -> tuple[str, ...]:
    """Each host's address for rendezvous: as given (one per host, else a one-line error: a dry run writes
    the files of a run that :func:`check` skips), else the host name itself."""
    if given and len(given) != len(hosts):
        raise UserError(f"launcher_options: addresses names {len(given)} addresses for {len(hosts)} hosts; "
                        f"name one address per host")
    return given or hosts


def check(spec: RunSpec, hosts: tuple[str, ...], given_addresses: tuple[str, ...], remote: RemoteShell,
          launcher: str) -> str | None:
    """Why ``hosts`` cannot carry ``spec``, or None."""
    if spec.nodes > 1 and len(hosts) < spec.nodes:
        return (f"{spec.nodes} nodes but [launcher_options.{launcher}] hosts names {len(hosts)}"
                if hosts else f"{spec.nodes} nodes: set [launcher_options.{launcher}] hosts")
    if given_addresses and len(given_addresses) != len(hosts):
        return f"[launcher_options.{launcher}] addresses must name one address per host"
    if remote == RemoteShell.NETNS:
        absent = [h for h in hosts[: spec.nodes] if not (NETNS_DIR / h).exists()]
        if absent:
            return f"no network namespace {', '.join(absent)} (start them: tools/netns_hosts.sh start {spec.nodes})"
    if remote == RemoteShell.SRUN and hosts:
        if launcher != "torchrun":
            return f"remote = \"srun\" starts torchrun's agents as job steps ({launcher}: use the slurm launcher)"
        if not os.environ.get("SLURM_JOB_ID") or shutil.which("srun") is None:
            return "remote = \"srun\": not inside a SLURM job (run under salloc --nodes=N, or in an sbatch script)"
    if spec.network != network.UNLIMITED and (remote != RemoteShell.NETNS or spec.nodes < 2):
        return "network caps are applied only between network-namespace hosts (remote = \"netns\", nodes >= 2)"
    if shapes_emulated_links(spec):
        if remote != RemoteShell.NETNS or not hosts:
            return (f"emulated links are shaped only on network-namespace hosts: set [launcher_options.{launcher}] "
                    f"hosts and remote = \"netns\" (tools/netns_hosts.sh start {spec.nodes})")
        if spec.network != network.UNLIMITED:
            return "network caps and emulated links both shape the hosts' links: give one of them"
    return None


def shapes_emulated_links(spec: RunSpec) -> bool:
    """Whether the run is an emulated cluster's whose links are shaped (a collective benchmark's spec has none)."""
    emulation = getattr(spec, "emulation", None)
    return bool(emulation) and emulated_cluster.shapes_links(emulation)


def shaping(spec: RunSpec, hosts: tuple[str, ...], remote: RemoteShell, interface: str) -> tuple[tuple[str, ...], ...]:
    """Commands that set each used host's link to the run's ``network`` value, or an emulated cluster's
    links (harness.machines.emulated_cluster), on network-namespace hosts only."""
    if remote != RemoteShell.NETNS:
        return ()
    if shapes_emulated_links(spec):
        return tuple(command for index, host in enumerate(hosts[: spec.nodes])
                     for command in emulated_cluster.shaping(spec.emulation, prefix(remote, host), interface,
                                                             spec.procs_per_node, spec.nodes, sys.executable, index))
    if spec.nodes < 2:
        return ()
    return tuple((*prefix(remote, host), *network.shaping_argv(interface, spec.network))
                 for host in hosts[: spec.nodes])


MAX_RANKS_PER_CORE = 8  # ranks started on this machine per core: beyond it a run only measures contention


def oversubscribed(spec: RunSpec, hosts: tuple[str, ...], cpu_count: int | None = None) -> str | None:
    """Why ``spec`` would start too many ranks on this machine (no hosts given), or None."""
    cores = cpu_count or os.cpu_count() or 1
    if hosts or spec.procs_per_node <= MAX_RANKS_PER_CORE * cores:
        return None
    return (f"{spec.procs_per_node} ranks on this machine's {cores} cores (more than {MAX_RANKS_PER_CORE} per "
            f"core): give hosts in [launcher_options.{spec.launcher}], or fewer procs_per_node")


NETNS_SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "netns_hosts.sh"
EMULATED_PREFIX = "rosetta-emu"  # the emulated cluster's namespaces (tools/netns_hosts.sh's ROSETTA_NETNS_PREFIX)


def run_prefix(pid: int | None = None) -> str:
    """The namespace prefix of this process's emulated hosts, ``rosetta-emu<pid>``: two runs at once (two
    reproduce sweeps, two test workers) make sets of their own, and neither's start or stop removes the
    other's (the script's start clears a set of its prefix first)."""
    return f"{EMULATED_PREFIX}{pid or os.getpid()}"


def planned_hosts(count: int, prefix: str | None = None) -> dict[str, str]:
    """The ``count`` hosts :func:`namespace_hosts` would make ({name: address}), as tools/netns_hosts.sh names
    and numbers them, without making them: what a dry run plans over (no root needed)."""
    prefix = prefix or run_prefix()
    return {f"{prefix}-h{i}": f"10.213.8.{i + 1}" for i in range(count)}


def _orphaned_prefixes(names: list[str]) -> set[str]:
    """The prefixes of emulated host sets among namespace ``names`` whose process has died (killed before
    its block could remove them)."""
    found = set()
    for name in names:
        match = re.fullmatch(rf"({re.escape(EMULATED_PREFIX)}(\d+))-(h\d+|sw)", name)
        if match and not _alive(int(match.group(2))):
            found.add(match.group(1))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def _stop(prefix: str) -> None:
    env = {**os.environ, "ROSETTA_NETNS_PREFIX": prefix}
    subprocess.run([str(NETNS_SCRIPT), "stop"], capture_output=True, env=env, check=False)


@contextmanager
def namespace_hosts(count: int, prefix: str | None = None) -> Iterator[dict[str, str]]:
    """``count`` hosts made of network namespaces for the length of the block ({name: address}), then
    removed; by default a set of this process's own (:func:`run_prefix`), after removing the sets of runs
    that died. Needs root (``ip netns``); a one-line error says so, or what the script answered."""
    if os.geteuid() != 0:
        raise UserError(f"the emulated cluster's hosts are network namespaces, which need root: run as root, or "
                        f"start them ({escaping.shell_line(['sudo', NETNS_SCRIPT, 'start', count])}) and name them in a "
                        "scenario")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    for orphan in _orphaned_prefixes([line.split()[0] for line in listed.splitlines() if line.split()]):
        _stop(orphan)
    prefix = prefix or run_prefix()
    env = {**os.environ, "ROSETTA_NETNS_PREFIX": prefix}
    done = subprocess.run([str(NETNS_SCRIPT), "start", str(count)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise UserError(f"{NETNS_SCRIPT.name} start {count}: {(done.stderr or done.stdout).strip()[-300:]}")
    try:
        yield dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    finally:
        _stop(prefix)
