"""The thin layer that runs a launch command: its own process group, a timeout, a clean kill."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psutil

from harness.launchers import LaunchCommand
from harness.lifetime import die_with_parent

KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None when the run was killed for its timeout
    timed_out: bool
    seconds: float  # wall time of the whole launch, start-up included


def run(command: LaunchCommand, *, cwd: Path, log_path: Path, timeout_s: float,
        on_tick: Callable[[], None] | None = None, tick_s: float = 0.5) -> Outcome:
    """Run ``command`` in a new session, its output appended to ``log_path``.

    On timeout, or if the caller is interrupted (KeyboardInterrupt re-raised), the
    whole process group is terminated, then killed after a grace period. Any
    process the launch left behind is killed after it exits: those in its group,
    and every descendant seen while it ran, even one that left the group.
    """
    env = {**os.environ, **command.env}
    start = time.monotonic()
    seen: dict[int, psutil.Process] = {}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(list(command.argv), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=die_with_parent)
        try:
            while True:
                try:
                    code = proc.wait(timeout=tick_s)
                    break
                except subprocess.TimeoutExpired:
                    _note_descendants(proc.pid, seen)
                    if on_tick is not None:
                        on_tick()
                    if time.monotonic() - start > timeout_s:
                        terminate_group(proc)
                        return Outcome(None, True, time.monotonic() - start)
        except BaseException:
            terminate_group(proc)
            raise
        finally:
            kill_group(proc.pid)
            _kill_survivors(seen)
    return Outcome(code, False, time.monotonic() - start)


def _note_descendants(pid: int, seen: dict[int, psutil.Process]) -> None:
    """Remember the launch's descendants (psutil tells a reused pid from the original)."""
    try:
        for child in psutil.Process(pid).children(recursive=True):
            seen.setdefault(child.pid, child)
    except psutil.Error:
        pass


def _kill_survivors(seen: dict[int, psutil.Process]) -> None:
    for process in seen.values():
        try:
            if process.is_running():  # False if the pid now belongs to another process
                process.kill()
        except psutil.Error:
            pass


def terminate_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, wait up to the grace period, then SIGKILL it."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    kill_group(proc.pid)
    proc.wait()


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
