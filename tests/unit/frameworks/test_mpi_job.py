"""The checks that a rank belongs to one job, run before MPI starts (frameworks/shared/mpi_job.py)."""

import pytest

from frameworks.shared import mpi_job


@pytest.mark.parametrize("env", [
    {},  # no launcher variables: a single process started by hand
    {"SLURM_PROCID": "0", "PMIX_RANK": "0"},  # srun with PMIx
    {"SLURM_PROCID": "0", "OMPI_COMM_WORLD_RANK": "1"},  # mpirun inside an allocation
    {"SLURM_PROCID": "0", "HOROVOD_RANK": "1"},  # horovodrun (Gloo) inside an allocation
])
def test_a_rank_of_one_job_passes(env):
    mpi_job.check_started_as_one_job(env)


def test_srun_without_pmi_names_the_setting():
    with pytest.raises(RuntimeError, match="set SLURM_MPI_TYPE=pmix"):
        mpi_job.check_started_as_one_job({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"})


def test_a_world_of_its_own_is_refused():
    mpi_job.check_world(2, 2, "Horovod")
    with pytest.raises(RuntimeError, match="Horovod sees 1 process"):
        mpi_job.check_world(1, 2, "Horovod")
