"""How late a submitter learns that a SLURM job ended: ``sbatch --wait`` against the slurm launcher's
``python -m harness.launchers.slurm.sbatch_wait``, side by side on the one-node test cluster
(tools/slurm_cluster.sh, root only: it runs in a network namespace of its own).

Each job sleeps for a given number of seconds under the same script the launcher writes (its EXIT trap
writes ``job.exit``); each is submitted once per waiter, alternating, and the table gives the seconds
from submission to the waiter's return, and that less the job's own sleep (the latency).
Usage: python benchmarks/sbatch_wait.py [--seconds 1,5,12,20] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.launchers.slurm import sbatch_wait  # noqa: E402

IN_NAMESPACE = ["ip", "netns", "exec", "rosetta-slurm"]  # tools/slurm_cluster.sh's namespace


def job_script(folder: Path, seconds: float) -> Path:
    """A job that sleeps ``seconds``, ending the way the slurm launcher's scripts end."""
    folder.mkdir(parents=True)
    script = folder / "job.sbatch"
    script.write_text("\n".join(["#!/bin/bash", f"#SBATCH --output={folder / 'slurm-%j.out'}", "set -euo pipefail",
                                 *sbatch_wait.exit_status_lines(folder), f"sleep {seconds}"]) + "\n")
    return script


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from starting ``argv`` in the cluster's namespace to its return (which must be 0)."""
    start = time.monotonic()
    subprocess.run([*IN_NAMESPACE, *argv], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", default="1,5,12,20", help="the jobs' lengths (s), comma-separated")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: the test cluster runs in a network namespace")
    lengths = [float(s) for s in args.seconds.split(",")]
    with tempfile.TemporaryDirectory(prefix="sbatch-wait-") as tmp:
        state = Path(tmp) / "slurm"
        started = subprocess.run([str(REPO / "tools/slurm_cluster.sh"), "start", str(state)], check=True,
                                 capture_output=True, text=True).stdout
        env = {**os.environ, **dict(line.split("=", 1) for line in started.splitlines() if "=" in line)}
        try:
            print(f"{'job (s)':>8} {'sbatch --wait (s)':>18} {'sbatch_wait (s)':>16} {'latency: --wait':>16} "
                  f"{'sbatch_wait':>12}")
            for repeat in range(args.repeats):
                for seconds in lengths:
                    plain = job_script(Path(tmp) / f"plain-{repeat}-{seconds}", seconds)
                    ours = job_script(Path(tmp) / f"ours-{repeat}-{seconds}", seconds)
                    a = timed(["sbatch", "--wait", "--parsable", str(plain)], env)
                    b = timed([sys.executable, "-m", "harness.launchers.slurm.sbatch_wait", str(ours)], env)
                    print(f"{seconds:8.0f} {a:18.1f} {b:16.1f} {a - seconds:16.1f} {b - seconds:12.1f}")
        finally:
            subprocess.run([str(REPO / "tools/slurm_cluster.sh"), "stop", str(state)], check=False)


if __name__ == "__main__":
    main()
