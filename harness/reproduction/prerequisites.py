"""What ``rosetta reproduce NAME --at emulated`` needs of this machine, checked before its first point: root
(the hosts are network namespaces), ``ip`` and ``tc`` (iproute2: the hosts, their links and each link's rate),
``iptables`` (each link's latency: the delay line's NFQUEUE, harness/base/delay_line.py) and the memory the
reference's largest point takes (its ranks x one rank's bytes, harness.reproduction.emulated_plan.rank_bytes; laid
out reduced where it does not fit). A missing tool or root stops the run in one line naming what is missing and
the command that installs it; too little memory is said, not fatal: the points beyond it run reduced or are
skipped rows saying so.

The probes (root, a tool's path, the memory available) are arguments, so a test asks about any machine
without starting a process.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Callable

import psutil

from harness.base import escaping
from harness.reproduction import emulated_plan as plan
from harness.reproduction.published import points
from harness.reproduction.reference import Reference

# tool -> (its Debian package, what the emulated cluster uses it for); the packages are in tools/system-packages.txt
TOOLS = {"ip": ("iproute2", "the hosts: network namespaces and their links"),
         "tc": ("iproute2", "each link's rate (tbf)"),
         "iptables": ("iptables", "each link's latency (the delay line's NFQUEUE)")}
INSTALLER = "tools/install_test_servers.sh"  # installs tools/system-packages.txt as root (every test server's too)
SBIN = "/usr/sbin:/sbin"  # where Debian puts ip, tc and iptables, off a user's PATH


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path=SBIN)


@dataclass(frozen=True)
class Probes:
    """How this machine is asked: whether we are root, where a tool is (None: absent), bytes available now."""

    is_root: Callable[[], bool] = lambda: os.geteuid() == 0
    which: Callable[[str], str | None] = _which
    available_bytes: Callable[[], int] = lambda: psutil.virtual_memory().available


@dataclass(frozen=True)
class Check:
    """The answer: what is missing (in words), the packages that supply it, and a note on memory ("" when
    the largest point fits)."""

    root: bool
    missing_tools: tuple[str, ...]
    packages: tuple[str, ...]
    memory: str

    @property
    def ok(self) -> bool:
        """Nothing missing that stops a run (memory only skips points)."""
        return self.root and not self.missing_tools

    def line(self, who: str = "--at emulated") -> str:
        """One line: ready, or what is missing and the command that installs it (``who``: what needs it)."""
        if self.ok:
            return f"{who}: prerequisites here (root, ip, tc, iptables)" + (f"; {self.memory}" if self.memory else "")
        missing = ([] if self.root else ["root (network namespaces)"]) + [
            f"{tool} ({TOOLS[tool][1]}, package {TOOLS[tool][0]})" for tool in self.missing_tools]
        fix = []
        if self.packages:
            install = escaping.shell_line(["sudo", "apt-get", "install", "-y", "--no-install-recommends", *self.packages])
            fix.append(f"install with `{install}` (or `{escaping.shell_line(['sudo', INSTALLER])}`, every test "
                       "server's packages too)")
        if not self.root:
            fix.append("run it as root (`sudo .venv/bin/rosetta reproduce ...`)")
        memory = f"; {self.memory}" if self.memory else ""
        return f"{who}: missing {', '.join(missing)}: {' and '.join(fix)}{memory}"


def memory_note(ref: Reference, available_bytes: int) -> str:
    """"" when the largest point's ranks fit this machine's usable memory at full size, else how much it needs
    and how it runs: reduced (emulated_plan.layout: host processes, gradients 1/s of their size) or, where even
    that does not fit or its framework has no reductions, which points will be skipped (the usable share:
    emulated_plan.MEMORY_SHARE of what is available)."""
    largest = max(points(ref), key=lambda p: p.gpus)
    framework = largest.run.framework
    rank = plan.rank_bytes(ref, 1, framework)
    usable = plan.usable_bytes(available_bytes)
    lay = plan.layout(ref, framework, largest.run.strategy, largest.nodes, largest.procs_per_node, available_bytes)
    if largest.gpus * rank <= usable and not lay.reduced:
        return ""
    need = (f"memory: the largest point ({largest.gpus} GPUs) needs {largest.gpus * rank / 1e9:.1f} GB at "
            f"{rank / 1e6:.0f} MB a rank, {usable / 1e9:.1f} GB usable now")
    processes = lay.nodes * lay.procs_per_node
    if lay.reduced and plan.fits(ref, framework, lay, available_bytes):
        reduced = processes * plan.rank_bytes(ref, lay.gradient_scale, framework)
        return (f"{need}: it runs reduced, {processes} processes of {lay.gpus_per_rank} GPUs, gradients at "
                f"1/{lay.gradient_scale} ({reduced / 1e9:.1f} GB)")
    most = plan.max_ranks(ref, lay.gradient_scale, available_bytes, framework) * lay.gpus_per_rank
    return f"{need}: points above {most} GPUs will be skipped"


def check(ref: Reference | None, probes: Probes = Probes()) -> Check:
    """Root, the tools and the memory of ``ref``'s largest point, asked through ``probes`` (``ref`` None: a
    scenario of one's own on the emulated cluster, whose ranks' memory its plan does not know: root and tools)."""
    absent = tuple(tool for tool in TOOLS if probes.which(tool) is None)
    packages = tuple(dict.fromkeys(TOOLS[tool][0] for tool in absent))
    return Check(root=probes.is_root(), missing_tools=absent, packages=packages,
                 memory=memory_note(ref, probes.available_bytes()) if ref is not None else "")
