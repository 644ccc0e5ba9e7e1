"""Entry point of every worker process: ``python -m harness.worker MODULE SPEC_FILE``.

It finds the rank from whichever launcher started it, sends the process's
output to ``rank<R>.log`` in the run's folder, opens the rank's event records,
then imports the framework's worker ``MODULE`` and calls its ``main``. An
exception becomes an ``error`` record and a non-zero exit.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path

from harness.events import EventWriter
from harness.spec import read_spec_file

# Rank variables of torchrun, Open MPI, MPICH/Hydra, PMIx and SLURM, in that order.
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")


def rank_from_env(env: dict[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    for var in RANK_VARIABLES:
        if var in env:
            return int(env[var])
    return 0


def log_path(out_dir: Path, rank: int) -> Path:
    return Path(out_dir) / f"rank{rank}.log"


def _redirect_output(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def main(argv: list[str] | None = None) -> None:
    module_name, spec_file = (argv if argv is not None else sys.argv[1:])[:2]
    spec, out_dir = read_spec_file(spec_file)
    rank = rank_from_env()
    _redirect_output(log_path(out_dir, rank))
    events = EventWriter(out_dir, rank)
    try:
        importlib.import_module(module_name).main(spec, events)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the records
        events.emit("error", message=f"{type(exc).__name__}: {exc}"[:2000])
        traceback.print_exc()
        sys.stderr.flush()
        events.close()
        os._exit(1)
    events.close()


if __name__ == "__main__":
    main()
