"""What one storage backend does that the others do not, against its real server on 127.0.0.1: the cache's
second read from local disk, NFS's user-space client (listing, ranges, writes past libnfs' NFSv4 limit,
a server that is down), the registry's errors, the rpcbind stand-in NFSv3 needs. What every backend does
is tests/conformance/test_conformance_storage.py's. A server that cannot start here skips its tests with the reason.
"""

import dataclasses
import hashlib
import random
import shutil
import uuid

import pytest

from harness.base.errors import UserError
from harness.storage import backends as storage, datagen
from testbed import servers as storage_servers
from tests.conftest import (
    S3_KEY as ACCESS_KEY,  # the shared test credentials
    S3_SECRET as SECRET_KEY,
)


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    try:
        with storage_servers.seaweedfs(tmp_path_factory.mktemp("weed"), ACCESS_KEY, SECRET_KEY) as url:
            yield url
    except storage_servers.Unavailable as exc:
        pytest.skip(f"S3 server (SeaweedFS) unavailable: {exc}")


@pytest.fixture(scope="module")
def nfs_server(tmp_path_factory):
    """NFS-Ganesha exporting a fresh folder (read-write, NFSv4); yields (nfs:// url of the export, the folder on disk)."""
    try:
        import libnfs  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"NFS client libnfs unavailable (pip install libnfs; needs apt libnfs-dev): {exc}")
    export = tmp_path_factory.mktemp("nfs-export")
    try:
        with storage_servers.nfs_ganesha(export, tmp_path_factory.mktemp("ganesha"), writable=True) as url:
            yield url, export
    except storage_servers.Unavailable as exc:
        pytest.skip(f"NFS server (NFS-Ganesha) unavailable: {exc}")


def nfs_dataset(dataset, nfs_server):
    """The dataset copied into the export (the server serves what is on disk: no NFS writes needed);
    returns (its nfs:// url, its folder on disk)."""
    url, export = nfs_server
    folder = f"rosetta-{uuid.uuid4().hex[:10]}"
    shutil.copytree(dataset, export / folder)
    return f"{url}/{folder}", export / folder


def test_sampled_verification_checks_the_chosen_fraction():
    checksums = {f"f{i}": hashlib.sha256(str(i).encode()).hexdigest() for i in range(100)}
    assert len(storage.Verifier(checksums, 0.1, seed=1).expected) == 10
    assert storage.Verifier(checksums, 0.1, seed=1).expected == storage.Verifier(checksums, 0.1, seed=1).expected
    assert storage.Verifier(checksums, 0.0).expected == {}


@pytest.mark.runs
def test_cached_second_read_is_served_from_local_disk(dataset, s3_endpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    bucket = f"rosetta-{uuid.uuid4().hex[:10]}"
    options = {"url": f"s3://{bucket}/d", "endpoint_url": s3_endpoint}
    storage.Store("s3", options).fs.mkdir(bucket)
    storage.upload(dataset, "s3", options)
    cached = storage.Store("cached", {**options, "remote": "s3", "cache_dir": str(tmp_path / "c")})
    first = cached.read(datagen.MANIFEST)
    assert cached.cached_count() == 1
    storage.Store("s3", options).fs.rm(f"{bucket}/d/{datagen.MANIFEST}")  # gone from the remote...
    assert cached.read(datagen.MANIFEST) == first  # ...still served by the cache
    storage.clear_cache(tmp_path / "c")
    with pytest.raises(storage.StorageError, match="storage cached: object"):
        storage.Store("cached", cached.options).read(datagen.MANIFEST)


def test_nfs_server_down_names_backend_and_object(libnfs_client):
    store = storage.Store("nfs", {"url": f"nfs://127.0.0.1:{storage_servers.free_port()}/rosetta/d"})
    with pytest.raises(storage.StorageError,
                       match=r"^storage nfs: reading nfs:127\.0\.0\.1:\d+/rosetta/d/a/b\.jpg failed: ConnectionError: "
                             r"mounting nfs://127\.0\.0\.1:\d+/rosetta/d \(NFSv4\) failed"):
        store.read("a/b.jpg")


@pytest.mark.runs
def test_nfs_lists_and_reads_ranges_like_a_local_folder(dataset, nfs_server):
    url, disk = nfs_dataset(dataset, nfs_server)
    fs = storage.Store("nfs", {"url": url}).fs
    root = storage.strip_protocol(url)
    assert sorted(e["name"].rsplit("/", 1)[1] for e in fs.ls(root)) == sorted(p.name for p in disk.iterdir())
    manifest = (disk / datagen.MANIFEST).read_bytes()
    assert fs.info(f"{root}/{datagen.MANIFEST}")["size"] == len(manifest)
    assert fs.info(f"{root}/files")["type"] == "directory"
    assert fs.cat_file(f"{root}/{datagen.MANIFEST}", start=5, end=50) == manifest[5:50]
    with pytest.raises(ValueError, match="outside the mounted"):
        fs.cat_file("127.0.0.1:1/elsewhere/x")
    with pytest.raises(NotImplementedError, match="whole objects only"):
        fs.open(f"{root}/new", "ab")


@pytest.mark.runs
def test_nfs_contexts_opened_together_are_separate_nfsv4_clients(dataset, nfs_server):
    """Two contexts one process opens back to back (tf.data's loader threads do): with libnfs's default
    client name, the same for both within a second, the second's SETCLIENTID expired the first one's state."""
    from harness.storage.nfs_fs import NFSFileSystem

    url, disk = nfs_dataset(dataset, nfs_server)
    first, second = NFSFileSystem(url), NFSFileSystem(url)
    root, manifest = storage.strip_protocol(url), (disk / datagen.MANIFEST).read_bytes()
    for fs in (first, second, first):
        assert fs.cat_file(f"{root}/{datagen.MANIFEST}") == manifest


@pytest.mark.runs
def test_nfs_writes_whole_objects_past_libnfs_4_0s_nfsv4_limit(dataset, nfs_server):
    """libnfs 4.0 cannot send an NFSv4 WRITE of ~3.9 KB or more: 10 KB goes in pieces and lands whole,
    its folders made, committed before pipe_file returns (the server's disk holds it at once)."""
    url, disk = nfs_dataset(dataset, nfs_server)
    fs = storage.Store("nfs", {"url": url}).fs
    root = storage.strip_protocol(url)
    data = random.Random(1).randbytes(10_000)
    fs.pipe_file(f"{root}/ckpt/a/b.bin", data)
    assert (disk / "ckpt" / "a" / "b.bin").read_bytes() == data
    fs.pipe_file(f"{root}/ckpt/a/b.bin", b"short")  # a new object replaces the old one whole
    assert fs.cat_file(f"{root}/ckpt/a/b.bin") == b"short"
    with fs.open(f"{root}/ckpt/c.bin", "wb") as fh:
        fh.write(data[:5000])
    assert (disk / "ckpt" / "c.bin").read_bytes() == data[:5000]
    fs.rm_file(f"{root}/ckpt/c.bin")
    assert not (disk / "ckpt" / "c.bin").exists()


@pytest.mark.runs
def test_cached_in_front_of_nfs_serves_the_second_read_from_local_disk(dataset, nfs_server, tmp_path):
    url, disk = nfs_dataset(dataset, nfs_server)
    cached = storage.Store("cached", {"url": url, "remote": "nfs", "cache_dir": str(tmp_path / "c")})
    first = cached.read(datagen.MANIFEST)
    assert first == (disk / datagen.MANIFEST).read_bytes() and cached.cached_count() == 1
    (disk / datagen.MANIFEST).unlink()  # gone from the server...
    assert cached.read(datagen.MANIFEST) == first  # ...still served by the cache
    with pytest.raises(storage.StorageError, match="storage nfs: object .*manifest.json not found"):
        storage.Store("nfs", {"url": url}).read(datagen.MANIFEST)


def test_nfs_needs_libnfs_only_for_nfs_urls(monkeypatch):
    no_client = dataclasses.replace(storage.REGISTRY["nfs"], packages=(("no_such_mod_xyz", "libnfs"),))
    monkeypatch.setitem(storage.REGISTRY, "nfs", no_client)
    with pytest.raises(UserError, match=r"storage nfs: needs the Python package libnfs \(pip install libnfs; "
                                        r".*apt-get install libnfs-dev\)"):
        storage.Store("nfs", {"url": "nfs://server/export/imagenet"})
    with pytest.raises(UserError, match=r"storage nfs: needs the Python package libnfs"):
        storage.Store("cached", {"url": "nfs://server/export/imagenet", "remote": "nfs", "cache_dir": "/tmp/c"})
    assert storage.Store("nfs", {"url": "/mnt/nfs/imagenet"}).fs.protocol[0] == "file"  # mounted: no client


def test_registry_names_missing_package_and_bad_options(monkeypatch):
    monkeypatch.setitem(storage.REGISTRY, "fake", storage.Backend("fake", (("no_such_mod_xyz", "no-such-pkg"),),
                                                                 lambda o: None, ""))
    with pytest.raises(UserError, match="storage fake: needs the Python package no-such-pkg"):
        storage.Store("fake", {"url": "x"})
    with pytest.raises(UserError, match="unknown; known: local"):
        storage.get("ftp")
    with pytest.raises(UserError, match="option url"):
        storage.Store("local", {})
    with pytest.raises(UserError, match="option remote"):
        storage.Store("cached", {"url": "/x", "cache_dir": "/tmp/c"}).fs


def test_the_rpcbind_stand_in_accepts_a_registration_and_maps_nothing(tmp_path):
    """What NFS-Ganesha's NFSv3 start needs of rpcbind (testbed/rpcbind_stub.py), over its socket."""
    import socket
    import struct

    from testbed import rpcbind_stub

    def call(sock, xid, procedure, version=4, program=rpcbind_stub.RPCBIND_PROGRAM):
        body = struct.pack(">10I", xid, 0, 2, program, version, procedure, 0, 0, 0, 0)  # CALL, AUTH_NONE twice
        sock.sendall(struct.pack(">I", 0x8000_0000 | len(body)) + body)
        (mark,) = struct.unpack(">I", sock.recv(4))
        return struct.unpack(f">{(mark & 0x7FFF_FFFF) // 4}I", sock.recv(mark & 0x7FFF_FFFF))

    with rpcbind_stub.serving(tmp_path / "run") as path, socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(path))
        assert call(sock, 7, 1) == (7, 1, 0, 0, 0, 0, 1)  # SET: accepted, TRUE
        assert call(sock, 8, 2, version=2) == (8, 1, 0, 0, 0, 0, 1)  # portmap v2 UNSET: TRUE
        assert call(sock, 9, 3) == (9, 1, 0, 0, 0, 0, 0)  # GETADDR: "" (nothing registered)
        assert call(sock, 10, 0, program=100003) == (10, 1, 0, 0, 0, 1)  # not rpcbind: PROG_UNAVAIL
    assert not path.exists()
