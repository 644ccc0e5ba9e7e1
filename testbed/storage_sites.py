"""A fresh place on every declared storage backend's real server: what the storage conformance suite
(tests/conformance/test_conformance_storage.py) runs over.

:class:`StorageBed` starts each real server once, on first use, on 127.0.0.1 (SeaweedFS, Azurite,
NFS-Ganesha, a JuiceFS gateway: :mod:`testbed.servers`) and stops them together; ``bed.site(name)``
gives a new, empty location on backend ``name`` as a :class:`Site`. ``SITES`` holds one function per
backend declared in harness.contract.axes.Storage (tests/conformance/test_conformance_storage.py fails on a declared
backend without one), and ``VARIANTS`` the further ways of naming one (an NFS folder mounted on a
cluster is a path). A server that cannot start here raises :class:`Unavailable` with the reason (the
suite skips that backend, saying why), and is not tried again.
"""

from __future__ import annotations

import os
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from harness.storage import backends
from testbed import servers
from testbed.storage_host import Unavailable

ACCESS_KEY, SECRET_KEY = "rosetta-test", "rosetta-test-secret-value"  # made up here, handed to the servers


@dataclass(frozen=True)
class Site:
    """An empty location on one backend: the options a Store reads it with, the variables its client reads
    credentials from, and a way to write an object on the server itself (past any cache in front)."""

    backend: str
    options: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    write_direct: Callable[[str, bytes], None] = lambda rel, data: None

    def store(self) -> backends.Store:
        """A Store reading the site (its credentials must be in the environment: see ``env``)."""
        return backends.Store(self.backend, self.options)

    def upload(self, root: Path) -> None:
        """Copy a dataset folder (``rosetta data make``'s) into the site, on the server itself."""
        for path in sorted(Path(root).rglob("*")):
            if path.is_file():
                self.write_direct(path.relative_to(root).as_posix(), path.read_bytes())


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """``env`` set in this process's environment for the block, the previous values back after."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class StorageBed:
    """Real servers started on first use (one of each kind), stopped by :meth:`close`."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self._stack = ExitStack()
        self._running: dict[str, Any] = {}
        self._failed: dict[str, str] = {}

    def server(self, kind: str, start: Callable[[], Any]) -> Any:
        """The running server ``kind``, started by entering ``start()`` the first time it is asked for."""
        if kind in self._failed:
            raise Unavailable(self._failed[kind])
        if kind not in self._running:
            try:
                self._running[kind] = self._stack.enter_context(start())
            except Unavailable as exc:
                self._failed[kind] = str(exc)
                raise
        return self._running[kind]

    def site(self, name: str) -> Site:
        """A fresh site on backend (or variant) ``name``."""
        return {**SITES, **VARIANTS}[name](self)

    def fresh_dir(self, what: str) -> Path:
        path = self.workdir / f"{what}-{uuid.uuid4().hex[:10]}"
        path.mkdir(parents=True)
        return path

    def close(self) -> None:
        self._stack.close()

    # the servers sites share
    def s3_endpoint(self) -> str:
        return self.server("seaweedfs", lambda: servers.seaweedfs(self.workdir / "weed", ACCESS_KEY, SECRET_KEY))

    def nfs_export(self) -> tuple[str, Path]:
        """NFS-Ganesha exporting a folder read-write over NFSv4: (its nfs:// url, the folder on disk)."""
        try:
            import libnfs  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"NFS client libnfs not installed (pip install libnfs; needs apt libnfs-dev): {exc}")
        export = self.workdir / "nfs-export"
        export.mkdir(exist_ok=True)
        url = self.server("ganesha", lambda: servers.nfs_ganesha(export, self.workdir / "ganesha", writable=True))
        return url, export


S3_ENV = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}


def _write_file(root: Path) -> Callable[[str, bytes], None]:
    def write(rel: str, data: bytes) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return write


def _write_through(backend: str, options: dict[str, Any], env: dict[str, str]) -> Callable[[str, bytes], None]:
    """Writes through the backend's own client (the server's API): objects land as the server stores them.
    One client for all of a site's writes (a new one per object costs a connection each)."""
    with environment(env):
        store = backends.Store(backend, options)
        fs = store.fs

    def write(rel: str, data: bytes) -> None:
        fs.pipe_file(f"{store.root}/{rel}", data)
    return write


def _bucket_site(backend: str, options: dict[str, Any], env: dict[str, str], bucket: str) -> Site:
    """A site in a new bucket (or container) made on the server first."""
    with environment(env):
        backends.Store(backend, options).fs.mkdir(bucket)
    return Site(backend, options, env, _write_through(backend, options, env))


def local_site(bed: StorageBed) -> Site:
    root = bed.fresh_dir("local")
    return Site("local", {"url": str(root)}, write_direct=_write_file(root))


def nfs_site(bed: StorageBed) -> Site:
    url, export = bed.nfs_export()
    folder = bed.fresh_dir("nfs").name
    (export / folder).mkdir()
    return Site("nfs", {"url": f"{url}/{folder}"}, write_direct=_write_file(export / folder))


def nfs_mounted_site(bed: StorageBed) -> Site:
    """What a cluster's mounted NFS folder is to the harness: a path, read like local."""
    return replace(local_site(bed), backend="nfs")


def s3_site(bed: StorageBed) -> Site:
    bucket = f"rosetta-{uuid.uuid4().hex[:10]}"
    return _bucket_site("s3", {"url": f"s3://{bucket}/data", "endpoint_url": bed.s3_endpoint()}, S3_ENV, bucket)


def blob_site(bed: StorageBed) -> Site:
    connection = bed.server("azurite", lambda: servers.azurite(bed.workdir / "azurite"))
    container = f"rosetta-{uuid.uuid4().hex[:10]}"
    env = {"AZURE_STORAGE_CONNECTION_STRING": connection}
    return _bucket_site("blob", {"url": f"abfs://{container}/data"}, env, container)


def cached_site(bed: StorageBed, backend: str = "cached") -> Site:
    """The cache in front of S3 (SeaweedFS): objects written to the bucket, read through the cache."""
    remote = s3_site(bed)
    options = {**remote.options, "remote": "s3", "cache_dir": str(bed.fresh_dir("cache"))}
    return Site(backend, options, remote.env, remote.write_direct)


def juicefs_site(bed: StorageBed, backend: str = "juicefs") -> Site:
    """The JuiceFS gateway in front of SeaweedFS: objects written through the gateway (JuiceFS stores
    blocks, not the objects as named), read through it."""
    def gateway():
        return servers.juicefs_gateway(bed.workdir / "juicefs", f"{bed.s3_endpoint()}/jfs", ACCESS_KEY, SECRET_KEY,
                                       cache_mb=256)

    started = bed.server("juicefs", gateway)
    options = {"url": f"s3://{started.bucket}/{bed.fresh_dir('jfs').name}", "endpoint_url": started.endpoint,
               "metrics_url": started.metrics_url}
    return Site(backend, options, S3_ENV, _write_through("s3", options, S3_ENV))


def alluxio_site(bed: StorageBed) -> Site:
    raise Unavailable("no Alluxio cluster here: alluxiofs has no release installable on this machine's Python, "
                      "so the backend is declared but untested")


# One per backend declared in harness.contract.axes.Storage that reads data (tests/conformance/test_conformance_storage.py).
SITES: dict[str, Callable[[StorageBed], Site]] = {
    "local": local_site,
    "nfs": nfs_site,
    "s3": s3_site,
    "blob": blob_site,
    "cached": cached_site,
    "cached_warm": lambda bed: cached_site(bed, "cached_warm"),
    "juicefs": juicefs_site,
    "juicefs_warm": lambda bed: juicefs_site(bed, "juicefs_warm"),
    "alluxio": alluxio_site,
}
VARIANTS: dict[str, Callable[[StorageBed], Site]] = {"nfs_mounted": nfs_mounted_site}
