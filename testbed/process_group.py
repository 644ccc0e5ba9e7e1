"""A server process of the test bed (a Spark master or worker, a Ray node, an MLflow server) as a process group
of its own: started with its output into a log, waited for until the log says it is up, stopped by its group,
so that what is started is also ended, whatever the server forked. A start that fails raises
:class:`testbed.storage_host.Unavailable` with the log's end (a test turns it into a skip)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Mapping, Sequence

from testbed.storage_host import Unavailable


def start(argv: Sequence[str], log: Path, ready: bytes, start_s: float, env: Mapping[str, str] | None = None,
          name: str = "") -> subprocess.Popen:
    """``argv`` in a session of its own, its output into ``log``; returns once the log holds ``ready``
    (within ``start_s`` seconds), else stops it and raises Unavailable with the log's end."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(env) if env is not None else None)
    deadline = time.monotonic() + start_s
    while ready not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise Unavailable(f"{name or argv[0]} did not start: {log.read_text(errors='replace')[-500:]}")
        time.sleep(0.3)
    return proc


def stop(proc: subprocess.Popen, term_wait_s: float = 20.0) -> None:
    """The process group ``proc`` leads: SIGTERM, then SIGKILL after ``term_wait_s`` seconds."""
    for sig, wait_s in ((signal.SIGTERM, term_wait_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait_s)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
