"""A test's own server processes (a Ray node, an MLflow server): testbed.process_group's, each started as a
process group of its own, waited for until its log says it is up, and stopped after by its group; one that
does not start skips the test."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Mapping, Sequence

import pytest

from testbed import process_group
from testbed.storage_host import Unavailable


def start(argv: Sequence[str], log: Path, ready: bytes, start_s: float, env: Mapping[str, str] | None = None,
          name: str = "") -> subprocess.Popen:
    """testbed.process_group.start, a server that does not start being the test's skip with the log's end."""
    try:
        return process_group.start(argv, log, ready, start_s, env, name)
    except Unavailable as exc:
        pytest.skip(str(exc))


stop = process_group.stop
