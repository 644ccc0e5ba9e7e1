"""What a Chainer rank says about itself and where it computes: its device, its BLAS threads, and the
versions and GPU facts of its hello record. Used by the worker, the emulated rank and
benchmarks/bare_loops/chainer.py.

Import after ``frameworks.shared.mpi_job.check_started_as_one_job`` (the worker does): mpi4py starts MPI.
"""

from __future__ import annotations

import os
import platform

from frameworks.chainer.compat import import_chainer

chainer = import_chainer()

import mpi4py  # noqa: E402
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from harness.contract.axes import Device  # noqa: E402


def resolve_device(requested: Device) -> str:
    gpu = chainer.backends.cuda.available
    if requested == Device.CUDA and not gpu:
        raise RuntimeError("device cuda requested but Chainer finds no CuPy/CUDA "
                           "(Chainer 7.8.1 needs CuPy 7, which current CUDA and Python 3.11 lack)")
    return "cuda" if requested != Device.CPU and gpu else "cpu"


def blas_threads(intra_size: int) -> int:
    """NumPy's BLAS threads for this rank: the launcher's OMP_NUM_THREADS (cores / ranks per node,
    as every framework gets), else this node's cores shared among its ranks."""
    given = os.environ.get("OMP_NUM_THREADS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    return max(1, len(os.sched_getaffinity(0)) // intra_size)


def versions() -> dict[str, str]:
    mpi_library = MPI.Get_library_version().replace("\x00", "").splitlines()[0].strip()  # C string, NUL-ended
    found = {"chainer": chainer.__version__, "mpi4py": mpi4py.__version__, "mpi": mpi_library,
             "numpy": np.__version__, "python": platform.python_version()}
    if chainer.backends.cuda.available:
        found["cupy"] = chainer.backends.cuda.cupy.__version__
    return found


def gpu_facts(device_kind: str) -> dict[str, str | int | None]:
    if device_kind != "cuda":
        return {"gpu_model": None, "gpu_count": 0}
    runtime = chainer.backends.cuda.cupy.cuda.runtime
    name = runtime.getDeviceProperties(runtime.getDevice())["name"]
    return {"gpu_model": name.decode() if isinstance(name, bytes) else name, "gpu_count": runtime.getDeviceCount()}
