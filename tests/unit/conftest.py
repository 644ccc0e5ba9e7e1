"""The unit layer's one rule, enforced: a test here starts no process (no subprocess, no fork, no
multiprocessing), unless it is marked ``runs``; `make test-unit` leaves those out. A test that starts one
unmarked fails saying so, whatever it caught: the refusal is remembered and reported after the test."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess

import pytest

_SPAWNERS = ("fork", "forkpty", "posix_spawn", "posix_spawnp")


class ProcessStarted(RuntimeError):
    """A unit test tried to start a process."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """Around the test's fixtures' set-up, module-scoped ones included."""
    yield from _refusing(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Around the test itself. Teardown is left free: a module-scoped fixture of a marked test (a SLURM
    cluster) is torn down after the module's last test, which need not be marked."""
    yield from _refusing(item)


def _refusing(item):
    if item.get_closest_marker("runs"):
        yield
        return
    def refuse(*args, **kwargs):
        if ("started_a_process", True) not in item.user_properties:
            item.user_properties.append(("started_a_process", True))
        raise ProcessStarted(f"{item.nodeid}: a unit test starts no process; mark it runs "
                             "(@pytest.mark.runs) or move it to tests/runs/")

    saved = {"popen": subprocess.Popen._execute_child, "start": multiprocessing.process.BaseProcess.start,
             **{name: getattr(os, name) for name in _SPAWNERS if hasattr(os, name)}}
    subprocess.Popen._execute_child = refuse
    multiprocessing.process.BaseProcess.start = refuse
    for name in _SPAWNERS:
        if name in saved:
            setattr(os, name, refuse)
    try:
        yield
    finally:
        subprocess.Popen._execute_child = saved["popen"]
        multiprocessing.process.BaseProcess.start = saved["start"]
        for name in _SPAWNERS:
            if name in saved:
                setattr(os, name, saved[name])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that caught the refusal still fails: it tried to start a process."""
    outcome = yield
    report = outcome.get_result()
    if call.when == "call" and report.passed and ("started_a_process", True) in item.user_properties:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: a unit test starts no process; mark it runs or move it to tests/runs/"
