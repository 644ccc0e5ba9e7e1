"""The emulated cluster's hosts are a set of the run's own: two runs at once never share (and so never remove)
each other's namespaces, and a set whose run died is found for removal."""

from __future__ import annotations

import os
from pathlib import Path

from harness.launchers import hosts


def _dead_pid() -> int:
    """A process id no process can have: above the kernel's largest."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_each_run_plans_hosts_under_its_own_prefix():
    mine, other = hosts.planned_hosts(2), hosts.planned_hosts(2, hosts.run_prefix(os.getpid() + 1))
    assert list(mine) == [f"rosetta-emu{os.getpid()}-h0", f"rosetta-emu{os.getpid()}-h1"]
    assert not set(mine) & set(other)


def test_only_the_sets_of_dead_runs_are_orphans():
    dead = _dead_pid()
    names = [f"rosetta-emu{os.getpid()}-h0", f"rosetta-emu{os.getpid()}-sw",  # this live run's
             f"rosetta-emu{dead}-h0", f"rosetta-emu{dead}-h1", f"rosetta-emu{dead}-sw",  # a killed run's
             "rosetta-h0", "rosetta-emu-h0", "rosetta-emu12x-h0", "other"]  # not the emulated runs' pattern
    assert hosts._orphaned_prefixes(names) == {f"rosetta-emu{dead}"}
