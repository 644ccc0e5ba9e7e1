"""torchrun (torch.distributed.run), single node, standalone rendezvous."""

from __future__ import annotations

from harness.launchers import LaunchCommand, LaunchRequest, threads_per_rank, worker_argv


def command(request: LaunchRequest) -> LaunchCommand:
    """``python -m torch.distributed.run --standalone --nproc-per-node P -m harness.worker ...``.

    ``python -m torch.distributed.run`` is the ``torchrun`` console script, run with the
    same interpreter as the harness so the workers see the same environment.
    """
    spec = request.spec
    argv = [request.python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", str(spec.procs_per_node), "--no-python", request.python]
    argv += worker_argv(request)
    threads = str(threads_per_rank(request))
    return LaunchCommand(tuple(argv), {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
                                       "PYTHONUNBUFFERED": "1"})
