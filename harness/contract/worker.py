"""Entry point of every worker process: ``python -m harness.contract.worker MODULE SPEC_FILE``.

It finds the rank from whichever launcher started it and sends the process's
output to ``rank<R>.log`` in the run's folder. It then runs the framework's
worker ``MODULE`` in a child process and waits for it, so that how the rank
ended is always on record, whatever the launcher: the child's exception becomes
an ``error`` record, and this supervisor adds an ``exit`` record with the exit
status or the signal (a segfault, the OOM killer's SIGKILL, an early exit 0
leave no word of their own), and the peak resident memory of the worker's largest process (``peak_rss_mb``,
every framework's, measured by the kernel). Signals the launcher sends are passed on to the
child; the supervisor dies with its parent and the child with the supervisor. A worker whose ``main``
returned leaves without the interpreter's teardown (:func:`exit_without_teardown`).
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from harness.contract.events import EventWriter
from harness.contract.lifetime import die_with_parent
from harness.contract.spec import read_spec_file

# Rank variables of torchrun, Horovod (Gloo controller), Open MPI, MPICH/Hydra, PMIx and SLURM, in that order;
# without them, TF_CONFIG (a Kubeflow TFJob) is read.
RANK_VARIABLES = ("RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
CHILD_FLAG = "--child"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


# torch.distributed's variables and where other launchers keep the same facts (Open MPI, MPICH/Hydra, SLURM).
TORCH_VARIABLES = {
    "RANK": ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"),
    "WORLD_SIZE": ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"),
    "LOCAL_RANK": ("HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"),
    "LOCAL_WORLD_SIZE": ("HOROVOD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                         "SLURM_NTASKS_PER_NODE"),
}


def torch_variables(env: dict[str, str]) -> dict[str, str]:
    """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from whichever launcher started the rank,
    so that one worker serves torchrun, mpirun, srun and a Kubeflow TFJob alike (torchrun's own win)."""
    found = {}
    for name, sources in TORCH_VARIABLES.items():
        if name not in env:
            value = next((env[s] for s in sources if s in env), None)
            if value is not None:
                found[name] = value.split("(")[0]  # SLURM_NTASKS_PER_NODE may read "2(x3)"
    if "RANK" not in env and "RANK" not in found and env.get("TF_CONFIG"):
        found.update(tf_config_variables(env["TF_CONFIG"]))
    return found


def tf_config_variables(tf_config: str) -> dict[str, str]:
    """The rank variables of a TensorFlow cluster description (TF_CONFIG, as a Kubeflow TFJob sets it
    in each pod): workers only, one rank per pod, rank = the task's index."""
    config = json.loads(tf_config)
    task, workers = config["task"], config["cluster"]["worker"]
    if task["type"] != "worker":
        raise ValueError(f"TF_CONFIG task type {task['type']!r}: Rosetta runs workers only")
    return {"RANK": str(task["index"]), "WORLD_SIZE": str(len(workers)), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}


def rank_from_env(env: dict[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    for var in RANK_VARIABLES:
        if var in env:
            return int(env[var])
    return int(torch_variables(dict(env)).get("RANK", 0))


def log_path(out_dir: Path, rank: int) -> Path:
    return Path(out_dir) / f"rank{rank}.log"


def _redirect_output(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def exit_fields(returncode: int) -> dict[str, object]:
    """An ``exit`` record's fields from a Popen return code (negative: killed by that signal)."""
    if returncode < 0:
        return {"code": None, "signal": signal.Signals(-returncode).name}
    return {"code": returncode, "signal": None}


def children_peak_rss_mb() -> float:
    """The peak resident memory (MiB) of the largest process among this process's waited-for descendants:
    the worker, or a process it started and waited for (a loader), whichever peaked higher (getrusage)."""
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def supervise(module_name: str, spec_file: str) -> int:
    """Run the worker as a child, record how it ended; returns the exit status to leave with."""
    die_with_parent()
    spec, out_dir = read_spec_file(spec_file)
    rank = rank_from_env()
    _redirect_output(log_path(out_dir, rank))
    child = subprocess.Popen([sys.executable, "-m", "harness.contract.worker", CHILD_FLAG, module_name, spec_file],
                             env={**os.environ, **torch_variables(dict(os.environ))}, preexec_fn=die_with_parent)
    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    returncode = _wait_sampling(child, out_dir, rank, spec)
    events = EventWriter(out_dir, rank)
    events.emit("exit", time=time.time(), **exit_fields(returncode), peak_rss_mb=children_peak_rss_mb())
    events.close()
    return returncode if returncode >= 0 else 128 - returncode


def _wait_sampling(child: subprocess.Popen, out_dir: Path, rank: int, spec: Any) -> int:
    """Wait for the worker, sampling its telemetry meanwhile (telemetry.sample_period_s of the rank's ``spec``);
    returns its return code."""
    from harness.contract import telemetry

    period_s = telemetry.sample_period_s(spec)
    sampler = telemetry.Sampler(child.pid, int(os.environ.get("LOCAL_RANK", "0")))
    with open(telemetry.telemetry_path(out_dir, rank), "a", buffering=1) as out:
        while True:
            try:
                return child.wait(timeout=period_s)
            except subprocess.TimeoutExpired:
                out.write(json.dumps(sampler.sample()) + "\n")


# Once a rank has written its end record its measurement is complete; what is left is the framework's
# teardown (a last barrier, destroy_process_group, exit handlers), which has been seen to hang: a clean-clone
# CI run's 4-rank gloo torch_ddp run, every rank ended, timed out at 240 s (destroy_process_group's hang,
# pytorch/pytorch#75097, is open). Past this grace the rank leaves by itself, status 0, saying so in its
# log and a ``teardown`` record, so that a complete run is not lost to it.
TEARDOWN_GRACE_S = 120.0


def _watch_teardown(events: EventWriter) -> Callable[[str], None]:
    """The events' callback that starts, at the end record, a timer leaving the process after the grace."""
    def leave() -> None:
        events.emit("teardown", time=time.time(), stuck=True, grace_s=TEARDOWN_GRACE_S)
        events.sync()
        print(f"rosetta worker: the framework's teardown did not end within {TEARDOWN_GRACE_S:g} s of the end "
              "record; leaving with status 0 (the records are complete)", file=sys.stderr, flush=True)
        os._exit(0)

    def on_event(event: str) -> None:
        if event == "end":
            timer = threading.Timer(TEARDOWN_GRACE_S, leave)
            timer.daemon = True  # not joined by the exit: it only acts while the process still lives
            timer.start()
    return on_event


def run_child(module_name: str, spec_file: str) -> None:
    """The worker itself: import the framework's module and call its ``main``."""
    spec, out_dir = read_spec_file(spec_file)
    events = EventWriter(out_dir, rank_from_env())
    events.on_event = _watch_teardown(events)
    try:
        importlib.import_module(module_name).main(spec, events)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the records
        events.emit("error", time=time.time(), message=f"{type(exc).__name__}: {exc}"[:2000])
        traceback.print_exc()
        sys.stderr.flush()
        events.close()
        os._exit(1)
    events.close()
    exit_without_teardown()


def exit_without_teardown() -> None:
    """Leave with status 0 as the interpreter's own exit would, less its teardown.

    Python's exit first joins the threads that are not daemons (thread pools among them), then runs
    the exit handlers (Horovod's shutdown, multiprocessing's reaping of loader processes, logging's
    flush) and MPI_Finalize; then it frees every module and object, which with TensorFlow or
    PyTorch loaded takes 0.7-1.1 s of every rank of every launch on 2 cores, measured, and only
    delays the exit status. This does the first two steps, flushes the output and exits.
    """
    threading._shutdown()  # what Py_FinalizeEx calls first  # noqa: SLF001
    atexit._run_exitfuncs()  # noqa: SLF001
    mpi = sys.modules.get("mpi4py.MPI")  # mpi4py finalizes from a C exit hook (Py_AtExit), run after those
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()  # else mpirun reports the rank as ended without MPI_Finalize, and fails the job
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    args = list(argv if argv is not None else sys.argv[1:])
    if args and args[0] == CHILD_FLAG:
        run_child(*args[1:3])
    else:
        sys.exit(supervise(*args[:2]))


if __name__ == "__main__":
    main()
