"""What ``rosetta reproduce NAME --at emulated`` needs of this machine, checked before its first point: root
(the hosts are network namespaces), ``ip`` and ``tc`` (iproute2: the hosts, their links and each link's rate),
``iptables`` (each link's latency: the delay line's NFQUEUE, harness/base/delay_line.py) and the memory the
reference's largest point takes (its ranks x one rank's bytes, harness.reproduction.emulated_reproduction.
rank_bytes). A missing tool or root stops the run in one line naming what is missing and the command that
installs it; too little memory is said, not fatal: the points beyond it are skipped rows saying so.

The probes (root, a tool's path, the memory available) are arguments, so a test asks about any machine
without starting a process.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Callable

import psutil

from harness.reproduction import emulated_reproduction as emulated
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
            fix.append(f"install with `sudo apt-get install -y --no-install-recommends {' '.join(self.packages)}` "
                       f"(or `sudo {INSTALLER}`, every test server's packages too)")
        if not self.root:
            fix.append("run it as root (`sudo .venv/bin/rosetta reproduce ...`)")
        memory = f"; {self.memory}" if self.memory else ""
        return f"{who}: missing {', '.join(missing)}: {' and '.join(fix)}{memory}"


def memory_note(ref: Reference, available_bytes: int) -> str:
    """"" when the largest point's ranks fit this machine's usable memory, else how much it needs and which
    points will be skipped (the usable share: emulated_reproduction.MEMORY_SHARE of what is available)."""
    reduced = emulated.reduction(ref)  # a process standing for G GPUs, its parameters 1/s of their size
    gpus, rank = reduced.get("gpus_per_rank", 1), emulated.rank_bytes(ref, reduced.get("gradient_scale", 1))
    most = max(p.gpus for p in points(ref))
    usable = available_bytes * emulated.MEMORY_SHARE
    if most / gpus * rank <= usable:
        return ""
    fits = max(1, int(usable // rank)) * gpus
    return (f"memory: the largest point ({most} GPUs) needs {most / gpus * rank / 1e9:.1f} GB at {rank / 1e6:.0f} MB "
            f"a rank, {usable / 1e9:.1f} GB usable now: points above {fits} GPUs will be skipped")


def check(ref: Reference | None, probes: Probes = Probes()) -> Check:
    """Root, the tools and the memory of ``ref``'s largest point, asked through ``probes`` (``ref`` None: a
    scenario of one's own on the emulated cluster, whose ranks' memory its plan does not know: root and tools)."""
    absent = tuple(tool for tool in TOOLS if probes.which(tool) is None)
    packages = tuple(dict.fromkeys(TOOLS[tool][0] for tool in absent))
    return Check(root=probes.is_root(), missing_tools=absent, packages=packages,
                 memory=memory_note(ref, probes.available_bytes()) if ref is not None else "")
