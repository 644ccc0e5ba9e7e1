"""The JAX rank's process: XLA's threads and CPU collectives set before JAX starts, ``jax.distributed`` joined from
the launcher's variables, the versions and device it reports.

Import this module before anything imports ``jax``: XLA reads its flags once, when its backend starts.
"""

from __future__ import annotations

import itertools
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable

# One rank per core (the launcher's OMP_NUM_THREADS = cores / ranks): XLA's CPU backend would otherwise run a thread
# pool over every core in each rank, oversubscribing the machine as many times as there are ranks.
if os.environ.get("OMP_NUM_THREADS") == "1":
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), "--xla_cpu_multi_thread_eigen=false",
                                        "intra_op_parallelism_threads=1"]).strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from harness.contract.axes import Device  # noqa: E402

# Where compiled programs are kept between runs (JAX's persistent compilation cache), only when asked: a cached
# program makes the compile event the cache's load time, not XLA's compilation. Kept in a folder per environment
# (its folder's name, jax-<key of its pins>): another JAX's programs are not this one's.
COMPILE_CACHE_VARIABLE = "ROSETTA_JAX_COMPILE_CACHE"


def compile_cache(variables: dict[str, str] | None = None) -> Path | None:
    """The compilation cache's folder for this environment, or None where the variable is unset."""
    root = (os.environ if variables is None else variables).get(COMPILE_CACHE_VARIABLE)
    return Path(root) / Path(sys.prefix).name if root else None


def configure(device: Device) -> str:
    """The platform the rank computes on (cpu: this environment has no CUDA plugin), set before JAX starts."""
    if device == Device.CUDA:
        raise RuntimeError("device cuda: the jax environment (tools/envs/jax.txt) has no CUDA plugin (jax[cuda12])")
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # the ranks' collectives across processes
    cache = compile_cache()
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(cache))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return "cpu"


def join(world_size: int) -> tuple[int, int, float]:
    """This process's rank and the world, after ``jax.distributed.initialize`` (rank 0 serves its coordinator at
    MASTER_ADDR:MASTER_PORT, which mpirun's launcher found free), and the seconds it took."""
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if world != world_size:
        raise RuntimeError(f"the launcher started {world} processes, the run has {world_size}")
    started = time.perf_counter()
    if world > 1:
        address = f"{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{os.environ['MASTER_PORT']}"
        jax.distributed.initialize(address, num_processes=world, process_id=rank)
    if jax.process_count() != world or jax.process_index() != rank:
        raise RuntimeError(f"jax.distributed: process {jax.process_index()} of {jax.process_count()}, "
                           f"the launcher said {rank} of {world}")
    return rank, world, time.perf_counter() - started


BARRIER_TIMEOUT_S = 900  # a rank's XLA compilation on a busy machine: minutes (the ranks' first barrier waits it)


def barrier(world: int) -> Callable[[], None]:
    """A barrier of all ranks through jax.distributed's coordination service (its key-value store, as JAX's own
    checkpointing waits), not a collective: Gloo makes its context at the first collective and gives up after
    30 s, which a rank still compiling on 2 busy cores exceeded (seen at load 25)."""
    if world == 1:
        return lambda: None
    from jax._src import distributed  # the client jax.distributed.initialize made

    count = itertools.count()
    return lambda: distributed.global_state.client.wait_at_barrier(f"rosetta-{next(count)}",
                                                                  timeout_in_ms=BARRIER_TIMEOUT_S * 1000)


def versions() -> dict[str, str]:
    import flax
    import jaxlib
    import optax

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "flax": flax.__version__,
            "optax": optax.__version__, "numpy": np.__version__, "python": platform.python_version()}
