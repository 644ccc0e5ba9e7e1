"""A real sweep killed with SIGKILL while its rank has printed a secret and hangs (the faulty framework's
``leak`` fault, tests/helpers/faults): what the resume and scrub tests start from."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import REPO

KILLED = """
name = "killed"
[settings]
warmup_steps = 1
measured_steps = 4
repeats = 1
timeout_s = 300
device = "cpu"
[matrix]
framework = "faulty_ddp"
workload = "resnet50"
size = "tiny"
procs_per_node = 1
batch_per_worker = 2
"""


def kill_once_leaked(path: Path, out: Path, secret: str, timeout_s: float = 240) -> Path:
    """Run scenario ``path`` into ``out`` in a harness of its own (its process group), its rank printing
    ``secret`` (in ``ROSETTA_TEST_SECRET``) and hanging; SIGKILL the group once a log holds the secret. The run's
    folder."""
    env = {**os.environ, "ROSETTA_TEST_SECRET": secret, "ROSETTA_TEST_FAULT": "leak:0:0"}
    code = ("import sys, frameworks; frameworks.REGISTRY['faulty_ddp'] = 'tests.helpers.faults'; "
            "from harness.cli import main; main.main(sys.argv[1:])")
    harness = subprocess.Popen([sys.executable, "-c", code, "run", str(path), "--results", str(out)], env=env,
                               cwd=str(REPO), start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s
        while not any(secret.encode() in p.read_bytes() for p in out.rglob("*.log") if p.is_file()):
            assert harness.poll() is None and time.monotonic() < deadline, "no rank printed the secret"
            time.sleep(0.5)
    finally:
        os.killpg(harness.pid, signal.SIGKILL)  # the harness and whatever of its group is left
        harness.wait()
    (run_dir,) = [p for p in out.glob("runs/*/*") if p.is_dir()]
    return run_dir
