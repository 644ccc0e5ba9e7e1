"""Storage backends: where a run's dataset is read from, each an fsspec file system.

One small interface (:class:`Store`: read one object by its path relative to the dataset root,
counting bytes and time) over a lazy registry of backends. A backend's client package is imported
only when the backend is opened; a missing one is a :class:`UserError` naming the package.

The backends are declared once, as members of harness.contract.axes.Storage; their clients (options to
an fsspec file system) are harness.storage.clients. Credentials never come from the scenario: s3 and blob
read them from the environment (harness.storage.clients says which variables). Options (``[storage_options.<backend>]``) hold only
locations: ``url`` (the dataset root), ``endpoint_url`` (s3), ``cache_dir`` and ``remote`` (cached),
``nfs_version`` and ``nfs_mount_port`` (nfs); and how the input pipeline reads: ``layout`` (image files or
tar shards), ``loader_workers``, ``verify_fraction``, ``stage_dir``.

nfs is either a mounted folder (``url = "/mnt/data/imagenet"``: read like ``local``, as on most clusters)
or ``nfs://host[:port]/export/path``, read through the user-space client libnfs without mounting
(harness.storage.nfs_fs); only the latter needs the libnfs package.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Mapping

from harness.base import config
from harness.base.errors import UserError
from harness.base.registry import Registry
from harness.contract.axes import Storage

REMOTES = tuple(storage.value for storage in Storage if storage.kind.cacheable)  # what ``cached`` may front


class Layout(str, Enum):
    """How an image dataset's samples are stored (bert datasets have one layout: partitions)."""

    FILES = "files"  # one object per JPEG (files/train/<class>/<key>.jpg): many small random reads
    SHARDS = "shards"  # WebDataset-style tar shards (shards/train-NNNNNN.tar), streamed: few large sequential reads


@dataclass(frozen=True)
class StorageOptions:
    """``[storage_options.<backend>]``: where a backend's dataset is, and how the input pipeline reads it.
    Locations only: credentials come from the environment (see the module docstring)."""

    url: str = ""  # the dataset root (a `rosetta data make` folder, uploaded): /path, s3://bucket/p, abfs://container/p,
    #                nfs://host[:port]/export/p
    endpoint_url: str = ""  # s3: an S3-compatible server's address
    remote: str = field(default="", metadata={"choices": ("", *REMOTES)})  # cached: what it fronts
    nfs_version: int = field(default=4, metadata={"min": 3, "max": 4})  # nfs:// urls: 4 needs only port 2049;
    #                                                  3 (full-size writes with libnfs 4.0) also needs MOUNT:
    nfs_mount_port: int = field(default=0, metadata={"min": 0, "max": 65535})  # its port (0: ask rpcbind)
    cache_dir: str = ""  # cached: local folder of the cache (per rank: <cache_dir>/rank<r>)
    stage_dir: str = ""  # copy-to-local staging: copy the rank's objects here first (timed), then read locally
    verify_fraction: float = field(default=0.05, metadata={"min": 0.0, "max": 1.0})  # of objects, sha256-checked
    loader_workers: int = field(default=2, metadata={"min": 0, "max": 256})  # DataLoader worker processes per rank
    layout: Layout = Layout.FILES  # images: read the files or the tar shards of the dataset
    metrics_url: str = ""  # juicefs: the gateway's Prometheus metrics (http://host:port/metrics): the cache hit rate
    checkpoint: str = field(default="off", metadata={"choices": ("off", "single", "sharded")})  # after the window:
    #     save a checkpoint (single: rank 0 writes one file; sharded: every rank its shard) and load it on every rank
    checkpoint_mb: float = field(default=0.0, metadata={"min": 0.0, "max": 1_000_000.0})  # its size: 0 = the model's state_dict,
    #     else synthetic tensors of this many MB (1e6 bytes) in all
    checkpoint_dir: str = "checkpoints"  # where: relative to url, or an absolute path / url on the same backend


def parse_options(value: Any, used: tuple, where) -> dict:
    """The scenario's ``[storage_options]``: one table per backend; every non-synthetic backend in the
    matrix needs one with a url. A url carrying credentials is refused (they belong in the environment)."""
    real = [s.value for s in Storage if s.kind.client]

    def options_of(name: str) -> tuple[Storage, type]:
        config.check_keys({name: None}, real, where)
        return Storage(name), StorageOptions
    options = config.build_tables(value or {}, where, "storage_options", options_of)
    for storage, opts in options.items():
        name = storage.value
        for key in ("url", "endpoint_url"):  # the URL-valued options (user:password@ is refused by config)
            location = getattr(opts, key)
            if "@" in (location.split("://", 1)[1].split("/", 1)[0] if "://" in location else ""):
                raise where.sub(name).error(key, "holds credentials (user@); set them in the environment instead")
        for key in ("url", "cache_dir", "stage_dir"):  # the path-valued options
            location = getattr(opts, key)
            if location and "://" not in location and not location.startswith("/"):  # the ranks start elsewhere
                raise where.sub(name).error(key, f"a relative path ({location!r}); give the whole path, from /")
    for storage in used:
        for key in storage.kind.needs:  # the options its declaration says it needs
            if not getattr(options.get(storage), key, ""):
                raise where.sub(storage.value).error(key, f"missing (required for storage {storage.value}: "
                                                          f"{', '.join(storage.kind.needs)})")
    return options


class StorageError(RuntimeError):
    """A backend could not deliver an object, or delivered wrong bytes; names both."""


@dataclass(frozen=True)
class Backend:
    name: str
    packages: tuple[tuple[str, str], ...]  # (module, PyPI package) the client needs
    open_fs: Callable[[Mapping[str, Any]], Any]  # options -> fsspec file system
    description: str
    install_hint: str = ""  # what a missing package itself needs, if anything
    # whether these options need the packages (nfs: only an nfs:// url; a mounted path reads like local)
    needs_packages: Callable[[Mapping[str, Any]], bool] = lambda options: True
    fronts: bool = False  # a cache in front of another backend (its option ``remote``)

    def missing(self, options: Mapping[str, Any] | None = None) -> list[str]:
        if options is not None and not self.needs_packages(options):
            return []
        return [pkg for module, pkg in self.packages if importlib.util.find_spec(module) is None]


def is_nfs_url(options: Mapping[str, Any]) -> bool:
    return str(options.get("url", "")).startswith("nfs://")


def _client(path: str) -> Callable[[Mapping[str, Any]], Any]:
    """The client function ``module:function`` (harness.storage.clients), imported when first called."""
    def open_fs(options: Mapping[str, Any]):
        module, function = path.split(":")
        return getattr(importlib.import_module(module), function)(options)
    return open_fs


def _backend(storage: Storage) -> Backend:
    kind = storage.kind
    prefix = kind.packages_for
    return Backend(kind.value, kind.packages, _client(kind.client), kind.description, kind.install_hint,
                   (lambda options: str(options.get("url", "")).startswith(prefix)) if prefix else lambda options: True,
                   fronts="remote" in kind.needs)


# Every backend that reads data, from its declaration (harness.contract.axes.Storage): nothing to add here.
REGISTRY: dict[str, Backend] = {storage.value: _backend(storage) for storage in Storage if storage.kind.client}
BACKENDS: Registry[Backend] = Registry("storage", REGISTRY)


def get(name: str, options: Mapping[str, Any] | None = None) -> Backend:
    """The backend, its client packages checked (for ``options``, when given: some need none for some urls)."""
    backend = BACKENDS.get(name)
    missing = backend.missing(options)
    if missing:
        raise UserError(f"storage {name}: needs the Python package {', '.join(missing)} "
                        f"(pip install {' '.join(missing)}{backend.install_hint})")
    return backend


def strip_protocol(url: str) -> str:
    return url.split("://", 1)[1] if "://" in url else url


class Store:
    """A dataset root on one backend: read objects by relative path, counting bytes, reads and time.

    Picklable before first use (the file system is opened lazily), so DataLoader workers each open
    their own connection.
    """

    def __init__(self, backend: str, options: Mapping[str, Any]):
        if not options.get("url"):
            raise UserError(f"storage {backend}: option url (the dataset root) is required")
        if get(backend, options).fronts and options.get("remote") in REMOTES:  # fail early, naming the package
            get(str(options["remote"]), options)  # and the client of what the cache fronts
        self.backend, self.options = backend, dict(options)
        self.root = strip_protocol(str(options["url"])).rstrip("/")
        self._fs = None
        self._pid = None  # the process that opened _fs: a forked loader worker opens its own
        self.bytes_read = 0
        self.reads = 0
        self.read_s = 0.0  # wall time inside read() (s)

    def __getstate__(self):
        return {**self.__dict__, "_fs": None}

    @property
    def fs(self):
        if self._fs is None or self._pid != os.getpid():
            self._fs, self._pid = get(self.backend, self.options).open_fs(self.options), os.getpid()
        return self._fs

    def url(self, rel: str) -> str:
        return f"{self.backend}:{self.root}/{rel}"

    def read(self, rel: str) -> bytes:
        t0 = time.perf_counter()
        try:
            data = self.fs.cat_file(f"{self.root}/{rel}")
        except FileNotFoundError:
            raise StorageError(f"storage {self.backend}: object {self.url(rel)} not found") from None
        except Exception as exc:  # a client's own error types differ per backend; name backend and object
            raise self._failure(rel, exc) from None
        self.read_s += time.perf_counter() - t0
        self.bytes_read += len(data)
        self.reads += 1
        return data

    def open(self, rel: str, digest: bool = False) -> "Reader":
        """A streaming reader of one object (read front to back, never held whole), counted like
        :meth:`read`; ``digest``: it also hashes the bytes (for :meth:`Verifier.check_digest`)."""
        t0 = time.perf_counter()
        try:
            fh = self.fs.open(f"{self.root}/{rel}", "rb")
        except FileNotFoundError:
            raise StorageError(f"storage {self.backend}: object {self.url(rel)} not found") from None
        except Exception as exc:
            raise self._failure(rel, exc) from None
        self.read_s += time.perf_counter() - t0
        self.reads += 1
        return Reader(self, rel, fh, digest)

    def is_local(self) -> bool:
        """Whether objects are files of this machine's file system (local, a mounted NFS folder)."""
        return self.backend == "local" or (self.backend == "nfs" and not is_nfs_url(self.options))

    def _failure(self, rel: str, exc: Exception) -> "StorageError":
        return StorageError(f"storage {self.backend}: reading {self.url(rel)} failed: "
                            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    def drain(self, rel: str, block: int = 8 << 20) -> int:
        """Read one object to its end, keeping nothing (fills a cache); returns its size in bytes."""
        with self.open(rel) as reader:
            while reader.read(block):
                pass
            return reader.size

    def cached_count(self) -> int | None:
        """Objects held in the local cache (``cached`` only), else None."""
        if not get(self.backend).fronts:
            return None
        cache = Path(self.options["cache_dir"])
        return sum(1 for p in cache.iterdir() if p.name != "cache") if cache.exists() else 0


class Reader:
    """A file object over one stored object: counts bytes and time into its Store, optionally hashes,
    and turns a client's error into a StorageError naming the backend and the object."""

    def __init__(self, store: Store, rel: str, fh, digest: bool):
        self.store, self.rel, self._fh = store, rel, fh
        self.hash = hashlib.sha256() if digest else None
        self.size = 0  # bytes read so far

    def read(self, size: int = -1) -> bytes:
        t0 = time.perf_counter()
        try:
            data = self._fh.read(size)
        except Exception as exc:
            raise self.store._failure(self.rel, exc) from None
        self.store.read_s += time.perf_counter() - t0
        self.store.bytes_read += len(data)
        self.size += len(data)
        if self.hash is not None:
            self.hash.update(data)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Verifier:
    """Checks a sample of reads against the manifest's sha256: wrong bytes fail the run.

    ``fraction`` of the objects (chosen by ``seed``, the same on every rank) are hashed when read.
    """

    def __init__(self, checksums: Mapping[str, str], fraction: float, seed: int = 0):
        keys = sorted(checksums)
        chosen = random.Random(seed).sample(keys, k=max(1, round(fraction * len(keys)))) if fraction > 0 and keys else []
        self.expected = {k: checksums[k] for k in chosen}
        self.verified = 0

    def wants(self, rel: str) -> bool:
        """Whether ``rel`` is one of the sampled objects (a streaming reader then hashes as it reads)."""
        return rel in self.expected

    def check(self, store: Store, rel: str, data: bytes) -> None:
        if rel in self.expected:
            self.check_digest(store, rel, hashlib.sha256(data).hexdigest(), len(data))

    def check_digest(self, store: Store, rel: str, got: str, size: int) -> None:
        """A sampled object's sha256 (hex) against the manifest: a mismatch raises, naming both."""
        want = self.expected.get(rel)
        if want is None:
            return
        if got != want:
            raise StorageError(f"storage {store.backend}: object {store.url(rel)} failed its checksum "
                               f"({size} bytes, sha256 {got[:12]}..., manifest {want[:12]}...)")
        self.verified += 1


def upload(local_root: Path, backend: str, options: Mapping[str, Any]) -> int:
    """Copy a dataset folder (``rosetta data make`` output) to a backend's ``url``; returns bytes copied."""
    store = Store(backend, options)
    total = 0
    for path in sorted(Path(local_root).rglob("*")):
        if path.is_file():
            rel = path.relative_to(local_root).as_posix()
            store.fs.pipe_file(f"{store.root}/{rel}", path.read_bytes())
            total += path.stat().st_size
    return total


def copy_to_local(store: Store, rels: list[str], dest: Path) -> float:
    """The "copy data to the nodes" staging step: fetch every object to ``dest``; returns seconds taken."""
    t0 = time.perf_counter()
    for rel in rels:
        target = Path(dest) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with store.open(rel) as reader, open(target, "wb") as out:  # streamed: partitions are GBs
            shutil.copyfileobj(reader, out, 8 << 20)
    return time.perf_counter() - t0


def clear_cache(cache_dir: Path) -> None:
    """Empty a ``cached`` backend's folder: the next run is a cold one."""
    shutil.rmtree(cache_dir, ignore_errors=True)
