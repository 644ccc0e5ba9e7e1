"""Whether a run's reads could come from the page cache: what the dataset weighs, this machine's memory, and
emptying the cache before a run (no deep-learning import here).

The harness reads these facts before it launches a run (:func:`dataset_footprint` from the dataset's
manifest, :func:`memory` from the kernel); harness.results.mlperf turns them into the row's
``potential_caching`` flag (DLIO's, made finer) and, under MLPerf Storage's rules, into a verdict.
:func:`drop` empties the cache: as root ``sync`` then ``echo 3 > /proc/sys/vm/drop_caches`` (every file's
pages on this machine, a server's on it included); without root, or where /proc/sys is read-only,
``posix_fadvise(DONTNEED)`` on the dataset's own files where they are local ones (a folder, a mounted
NFS), which drops only their clean pages, and nothing for a remote store, whose client keeps no page
cache (s3fs, adlfs, libnfs) and whose server's cache is the server's. The row says which was done.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import psutil

from harness.contract.axes import CacheDrop
from harness.storage import datagen

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


@dataclass(frozen=True)
class Footprint:
    """The objects a run's layout reads: their bytes, samples, count, and local paths where they are files."""

    bytes: int
    samples: int
    objects: int
    local_files: tuple[Path, ...] = ()


def dataset_footprint(manifest: Mapping[str, Any], layout: str, root: str | None) -> Footprint:
    """What a run reads of the dataset ``manifest`` describes: JPEG files (``layout`` files), tar shards
    (shards) or BERT partitions (a bert manifest); ``root`` is the dataset's local folder, if it has one."""
    if manifest.get("kind") == "bert":
        units, samples = manifest["partitions"], sum(int(p["samples"]) for p in manifest["partitions"])
    elif layout == "shards":
        units, samples = manifest["shards"], sum(int(s["samples"]) for s in manifest["shards"])
    else:
        units = [{"path": s["file"], "bytes": s["bytes"]} for s in manifest["samples"]]
        samples = len(units)
    local = tuple(Path(root) / u["path"] for u in units) if root else ()
    return Footprint(sum(int(u["bytes"]) for u in units), samples, len(units), local)


def read_footprint(store: Any, layout: str) -> Footprint:
    """The footprint of the dataset behind ``store`` (a harness.storage.backends.Store), from its manifest."""
    manifest = datagen.read_manifest(store.read(datagen.MANIFEST), store.url(datagen.MANIFEST))
    return dataset_footprint(manifest, layout, store.root if store.is_local() else None)


def memory() -> tuple[int, int]:
    """This machine's memory (bytes): the total (what MLPerf Storage's rules count) and what is available
    now (free plus reclaimable, the page cache included: what it could grow to)."""
    mem = psutil.virtual_memory()
    return int(mem.total), int(mem.available)


def drop(local_files: tuple[Path, ...] = ()) -> CacheDrop:
    """Empty the page cache before a run: every page on the machine as root, else the pages of
    ``local_files`` (the dataset's files, where it is a local or mounted folder); returns what was done."""
    if os.geteuid() == 0:
        try:
            os.sync()
            DROP_CACHES.write_text("3\n")
            return CacheDrop.DROP_CACHES
        except OSError:  # a container's read-only /proc/sys: fall back to the files themselves
            pass
    if not local_files:
        return CacheDrop.NONE
    for path in local_files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return CacheDrop.FADVISE
