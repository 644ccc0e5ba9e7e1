"""Checks that a rank was started as one process of an MPI (or Horovod) job, shared by the MPI frameworks.

Framework-free: run before MPI starts, so that a launch that cannot join the ranks ends with what to
set instead of Open MPI's page about rebuilding it, or with every process training alone.
"""

from __future__ import annotations

from typing import Mapping

# Variables that say this process belongs to a job of several ranks: Open MPI's mpirun, PMIx, PMI-2,
# and horovodrun's Gloo controller (whose ranks may run inside a SLURM allocation too).
JOB_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "HOROVOD_RANK")

SRUN_WITHOUT_PMI = ("srun started this rank without PMI, so MPI cannot join the ranks: set SLURM_MPI_TYPE=pmix "
                    "in the harness's environment (or MpiDefault=pmix in slurm.conf)")


def check_started_as_one_job(env: Mapping[str, str]) -> None:
    """srun without PMI (SLURM's MpiDefault=none) starts each rank as a lone process, which Open MPI aborts
    in MPI_Init: raise, naming the setting, before MPI starts."""
    if "SLURM_PROCID" in env and not any(v in env for v in JOB_VARIABLES):
        raise RuntimeError(SRUN_WITHOUT_PMI)


def check_world(seen: int, expected: int, library: str) -> None:
    """Raise if the communication library sees another number of ranks than the run has (a launcher it
    does not know starts every process alone, each of which would train on its own)."""
    if seen != expected:
        raise RuntimeError(f"{library} sees {seen} process(es) but the run has {expected} ranks: the launcher did "
                           f"not start them as one job (with slurm, srun needs PMI: SLURM_MPI_TYPE=pmix)")


HIERARCHICAL_VARIABLE = "HOROVOD_HIERARCHICAL_ALLREDUCE"


def hierarchical_not_applied(env: Mapping[str, str], nccl_built: bool, on_gpu: bool, nodes: int) -> str | None:
    """Why a run that set HOROVOD_HIERARCHICAL_ALLREDUCE did not get it (None if it did not ask or got it).

    Horovod's hierarchical allreduce is an NCCL operation on GPU tensors (NCCLHierarchicalAllreduce); on CPU
    tensors (Gloo or MPI) the variable is read and silently ignored, and on one node there is no level to
    go across. The row says so instead of calling a flat allreduce hierarchical."""
    if env.get(HIERARCHICAL_VARIABLE, "0").strip().lower() in ("", "0", "false"):
        return None
    reasons = []
    if not (nccl_built and on_gpu):
        reasons.append("Horovod's hierarchical allreduce runs on NCCL with GPU tensors; these are CPU tensors "
                       "(a flat allreduce ran)")
    if nodes < 2:
        reasons.append("all ranks are on one node")
    return f"{HIERARCHICAL_VARIABLE} set but not applied: " + "; ".join(reasons) if reasons else None


# The skip reason of a Horovod rank that found a GPU but a Horovod that cannot exchange GPU tensors.
NO_NCCL = ("Horovod here was built without NCCL (nccl_built() is 0), so it cannot exchange GPU tensors: rebuild it "
           "where a CUDA toolkit and NCCL are found (tools/install_horovod.py --force then builds with "
           "HOROVOD_GPU_OPERATIONS=NCCL) or run the ranks in the image of docker/horovod.Dockerfile "
           "(rosetta/horovod:0.28.1, CUDA 12.6 with NCCL)")


def horovod_build(nccl: int, cuda: bool, mpi: bool, gloo: bool) -> str:
    """What a Horovod build has, as its ``*_built()`` functions answer (for the row's versions): e.g.
    ``"nccl 2.21.5, cuda, mpi, gloo"``; ``nccl`` is NCCL's version as an integer (0: none)."""
    parts = [f"nccl {nccl // 10000}.{nccl // 100 % 100}.{nccl % 100}" if nccl else "no nccl"]
    parts += [name for name, built in (("cuda", cuda), ("mpi", mpi), ("gloo", gloo)) if built]
    return ", ".join(parts)
