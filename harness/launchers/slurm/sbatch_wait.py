"""``python -m harness.launchers.slurm.sbatch_wait SCRIPT``: submit a batch script, return when its job ends.

``sbatch --wait`` learns of the end late: it asks the controller after 2, 10 and 42 seconds, then
every 32 (SLURM's ``_job_wait``: the sleep grows fourfold up to 32 s while it is below MinJobAge / 2,
and MinJobAge is 300 s unless a site lowers it). A 20-second benchmark job was reported done after
42 s; a sweep of them spends more time waiting than training. So the job's script writes its exit
status to ``EXIT_FILE`` beside it as its last act (an EXIT trap: ``exit_status_lines``), and this
waiter watches that file, which costs the controller nothing. It asks the controller (``scontrol
show job``) every ``QUEUE_POLL_S`` too, for a job that ended without writing it (cancelled, out of
time, its node lost) and for a file a shared file system's cache still hides from this host: a
finished job's record holds its exit status.

Prints the job id (as ``sbatch --parsable`` does) and exits with the job's exit status. Pure
standard library: it runs in the harness's environment on the submitting host.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.base import escaping

EXIT_FILE = "job.exit"
FILE_POLL_S = 0.2  # a stat of a local file
QUEUE_POLL_S = 5.0  # one scontrol call: what sbatch --wait itself costs the controller, less often
# the status of a job ended by a signal (sbatch --wait's too), or that ended without a word from the
# file or the controller
NO_STATUS = 1
FORGOTTEN_GRACE_S = 60.0  # a file hidden by a shared file system's attribute cache shows up within this
FINISHED = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "TIMEOUT"}


@dataclass(frozen=True)
class JobRecord:
    """What the controller says of the job: its state, and its exit status and signal once it ended."""

    state: str
    code: int
    signal: int


def exit_status_lines(folder: Path) -> list[str]:
    """The batch script's lines (after ``set -euo pipefail``) that write its exit status to ``EXIT_FILE``
    in ``folder`` as it ends, whole (by a rename), whatever ends it short of a signal no trap sees."""
    return [f"ROSETTA_EXIT_FILE={escaping.shell_word(folder / EXIT_FILE)}",
            """trap 'echo $? > "$ROSETTA_EXIT_FILE.tmp" && mv "$ROSETTA_EXIT_FILE.tmp" "$ROSETTA_EXIT_FILE"' EXIT"""]


def submit(script: Path) -> str:
    """``sbatch --parsable SCRIPT``: the job id (``--parsable`` may append ``;cluster``)."""
    done = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"sbatch {script} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout.strip().split(";")[0]


def job_record(job_id: str) -> JobRecord | None | bool:
    """The controller's record of the job; False once it has forgotten the job (MinJobAge after its
    end); None if it could not be asked this time (busy, unreachable)."""
    try:
        done = subprocess.run(["scontrol", "--oneliner", "show", "job", job_id], capture_output=True, text=True)
    except OSError:  # no scontrol on this host: the file alone tells the end (or the run's timeout does)
        return None
    if done.returncode != 0:
        return False if "Invalid job id" in done.stderr else None
    state = re.search(r"\bJobState=(\S+)", done.stdout)
    exit_code = re.search(r"\bExitCode=(\d+):(\d+)", done.stdout)
    if not (state and exit_code):
        return None
    return JobRecord(state.group(1), int(exit_code.group(1)), int(exit_code.group(2)))


def read_status(exit_file: Path) -> int | None:
    text = exit_file.read_text().strip() if exit_file.exists() else ""
    return int(text) if text else None  # written whole by a rename: empty only if absent


def wait(job_id: str, exit_file: Path, *, file_poll_s: float = FILE_POLL_S,
         queue_poll_s: float = QUEUE_POLL_S) -> int:
    """The job's exit status: from ``exit_file`` as soon as it appears, else from the controller's
    record of the finished job (NO_STATUS if a signal ended it, as sbatch --wait says)."""
    next_look, forgotten_at = time.monotonic() + queue_poll_s, None
    while (status := read_status(exit_file)) is None:
        now = time.monotonic()
        if forgotten_at is not None and now - forgotten_at > FORGOTTEN_GRACE_S:
            print(f"job {job_id}: the controller no longer knows it and {exit_file} never appeared", file=sys.stderr)
            return NO_STATUS
        if forgotten_at is None and now >= next_look:
            record, next_look = job_record(job_id), now + queue_poll_s
            if record is False:
                forgotten_at = now
            elif record and record.state in FINISHED:
                if record.signal:
                    print(f"job {job_id} {record.state}: ended by signal {record.signal}", file=sys.stderr)
                    return NO_STATUS
                return record.code
        time.sleep(file_poll_s)
    return status


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        raise SystemExit("usage: python -m harness.launchers.slurm.sbatch_wait SCRIPT")
    script = Path(argv[0])
    exit_file = script.with_name(EXIT_FILE)
    exit_file.unlink(missing_ok=True)  # a resumed run's folder may hold the last attempt's
    job_id = submit(script)
    print(job_id, flush=True)
    return wait(job_id, exit_file)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
