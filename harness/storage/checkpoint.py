"""Checkpoint save and load through a storage backend, as a measured phase (no deep-learning import here).

Two layouts, as DLIO's checkpoint workloads have them: ``single`` (rank 0 writes one file of the whole
checkpoint; every rank reads it) and ``sharded`` (every rank writes its own shard of size total / N;
rank r reads the shard of rank (r + 1) mod N, DLIO's ``recovery_rank_shift``, so that across nodes no
rank reads what its own node just wrote). Each phase starts at a barrier; a rank's time is from that
barrier to the end of its own part (the row takes the slowest rank's). The page cache is kept out of
the numbers as far as one unprivileged process can: a local file is ``fsync``-ed and its pages dropped
(``posix_fadvise DONTNEED``) after writing and again before reading; an object store's PUT returns once
the server committed the object, and nothing is cached on the client; an ``nfs://`` object is written
through libnfs and COMMITted (NFS's fsync: on the server's disk), and libnfs, a user-space client, has
no page cache here (the kernel's is never involved). The server's own cache (the page cache of the
machine serving it, NFS-Ganesha's here) is dropped by neither: a load right after the save may be served
from the server's memory, as from a cluster's file server. What was done is said in the record
(``cache_defeat``), so a row never claims more than that.

:func:`phase` is a run's checkpoint phase for any framework: the framework brings only its barrier, a
broadcast of rank 0's folder name and, for a real model, the model's bytes (torch_ddp's checkpointing.py);
an emulated accelerator, which has no model, saves synthetic bytes of the size the options say.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import numpy as np

from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.storage.backends import StorageError, Store

MODES = ("single", "sharded")


def synthetic_payload(total_bytes: int, rank: int, world: int, mode: str, seed: int = 0) -> bytes:
    """This rank's part of a synthetic checkpoint of ``total_bytes``: random bytes (incompressible),
    the whole for rank 0 of ``single`` (nothing for the others), total / world for ``sharded``."""
    if mode == "single":
        size = total_bytes if rank == 0 else 0
    else:
        size = total_bytes // world
    return np.random.default_rng(seed * 1000 + rank).integers(0, 256, size, dtype=np.uint8).tobytes()


# How a written object is made durable on each kind of backend (the record's ``written_as``), and what
# besides keeps a cache out of the load that follows (``cache_defeat`` is the two together)
_DURABLE = {"local": "fsync+fadvise_dontneed", "nfs": "nfs_commit", "store": "put_committed"}
_NO_CACHE = {"local": "", "nfs": ", no client cache (libnfs), server cache kept", "store": ", no client cache"}


def _kind(store: Store) -> str:
    """local (a folder, NFS mounted included), nfs (nfs:// through libnfs) or store (an object store)."""
    return "local" if store.is_local() else "nfs" if store.backend == "nfs" else "store"


def write_durable(store: Store, rel: str, data: bytes) -> str:
    """Write one object so that it is on the backend, not in this machine's page cache; returns how."""
    path = f"{store.root}/{rel}"
    try:
        if store.is_local():
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
                os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        else:
            store.fs.pipe_file(path, data)  # nfs_fs and the object stores return once the server has it
        return _DURABLE[_kind(store)]
    except Exception as exc:  # each client has its own errors: name backend and object
        raise StorageError(f"storage {store.backend}: writing {store.url(rel)} failed: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


def drop_cached_pages(store: Store, rel: str) -> None:
    """Drop a local file's pages from the page cache before it is read (nothing to do for object stores)."""
    if store.is_local():
        fd = os.open(f"{store.root}/{rel}", os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def object_name(folder: str, mode: str, rank: int) -> str:
    return f"{folder}/model.ckpt" if mode == "single" else f"{folder}/shard-{rank:05d}.ckpt"


def save_and_load(store: Store, folder: str, mode: str, payload: bytes, rank: int, world: int,
                  barrier: Callable[[], None], decode: Callable[[bytes], Any] = len) -> dict[str, Any]:
    """Save this rank's ``payload`` then load a checkpoint back, each phase between barriers; returns the
    rank's ``checkpoint`` record (seconds, bytes, how the page cache was kept out). ``decode`` turns the
    bytes read into the training state (e.g. ``torch.load``); it runs inside the load phase."""
    if mode not in MODES:
        raise ValueError(f"checkpoint mode {mode!r}: one of {', '.join(MODES)}")
    mine = object_name(folder, mode, rank)
    barrier()
    t0 = time.perf_counter()
    how = write_durable(store, mine, payload) if payload else "none"
    save_s = time.perf_counter() - t0
    barrier()
    source = object_name(folder, mode, 0 if mode == "single" else (rank + 1) % world)
    if rank == 0 or mode == "sharded":
        drop_cached_pages(store, source)
    barrier()
    t0 = time.perf_counter()
    data = store.read(source)
    decode(data)
    load_s = time.perf_counter() - t0
    barrier()
    kind = _kind(store)  # through libnfs, the server's page cache is not ours to drop
    defeat = _DURABLE[kind] + _NO_CACHE[kind]
    if mode == "sharded" and world > 1:
        defeat += ", rank_shift=1"
    return {"mode": mode, "bytes_written": len(payload), "bytes_read": len(data), "save_s": save_s,
            "load_s": load_s, "cache_defeat": defeat, "written_as": how}


ModelState = Callable[[str], tuple[bytes, Callable[[bytes], Any]]]  # mode -> (this rank's payload, its decode)


def phase(spec: RunSpec, events: EventWriter, rank: int, world: int, barrier: Callable[[], None],
          broadcast: Callable[[str], str], model_state: ModelState | None = None) -> None:
    """Save and load one checkpoint if the run's storage options ask for it (``checkpoint``), after the
    measured window; emits the rank's ``checkpoint`` record. ``broadcast(value)`` returns rank 0's
    ``value`` on every rank (the run's folder name, 8 hex digits); ``model_state``, if given, makes the
    payload of ``checkpoint_mb = 0`` from the model (None: an emulated accelerator, which has no model)."""
    options = dict(spec.storage_options)
    mode = options.get("checkpoint", "off")
    if mode == "off" or not options:
        return
    size_mb = float(options.get("checkpoint_mb", 0.0))
    if size_mb > 0:
        payload, decode = synthetic_payload(int(size_mb * 1e6), rank, world, mode, spec.seed), len
    elif model_state is None:
        raise ValueError("checkpoint: an emulated accelerator has no model; set checkpoint_mb (the size in MB)")
    else:
        payload, decode = model_state(mode)
    where = options.get("checkpoint_dir") or "checkpoints"
    if where.startswith("/") or "://" in where:  # a place of its own on the same backend
        options, where = {**options, "url": where}, ""
    store = Store(spec.storage.value, options)
    token = broadcast(uuid.uuid4().hex[:8])  # one folder per run, the same on every rank
    folder = "/".join(part for part in (where, f"{spec.config_id()}-r{spec.repeat}-{token}") if part)
    events.emit("checkpoint", **save_and_load(store, folder, mode, payload, rank, world, barrier, decode))
