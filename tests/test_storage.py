"""One test suite every storage backend passes, each against its real server on 127.0.0.1.

local: a folder; s3: SeaweedFS; blob: Azurite; cached: fsspec's filecache in front of SeaweedFS;
nfs: NFS-Ganesha exporting a folder over NFSv4, read (and written) through libnfs, nothing mounted; nfs_mounted: an
NFS url that is a plain path (a mounted NFS folder on a cluster), read like local.
A server that cannot start here skips its backend's tests with the reason.
"""

import dataclasses
import hashlib
import random
import shutil
import tarfile
import uuid
from pathlib import Path

import pytest

from harness.base.errors import UserError
from harness.storage import backends as storage, datagen, textdata
from testbed import servers as storage_servers
from tests.conftest import (
    S3_KEY as ACCESS_KEY,  # the shared test credentials
    S3_SECRET as SECRET_KEY,
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("dataset")
    datagen.make(datagen.parse_spec({"count": 6, "classes": 2, "shard_samples": 4, "min_kb": 5, "max_kb": 20},
                                    "test"), root)
    return root


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    try:
        with storage_servers.seaweedfs(tmp_path_factory.mktemp("weed"), ACCESS_KEY, SECRET_KEY) as url:
            yield url
    except storage_servers.Unavailable as exc:
        pytest.skip(f"S3 server (SeaweedFS) unavailable: {exc}")


@pytest.fixture(scope="module")
def blob_connection(tmp_path_factory):
    try:
        with storage_servers.azurite(tmp_path_factory.mktemp("azurite")) as conn:
            yield conn
    except storage_servers.Unavailable as exc:
        pytest.skip(f"Blob server (Azurite) unavailable: {exc}")


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


def server_write(store, rel, data):
    """Replace an object on the backend's server itself (not through a cache)."""
    if getattr(store, "disk_root", None):  # nfs: the exported folder on disk
        (Path(store.disk_root) / rel).write_bytes(data)
    else:
        (store.fs.fs if store.backend == "cached" else store.fs).pipe_file(f"{store.root}/{rel}", data)


BACKENDS = ["local", "s3", "blob", "cached", "nfs", "nfs_mounted"]


@pytest.fixture(scope="module")
def text_dataset(tmp_path_factory):
    """Pre-tokenized BERT partitions (3 x 70 sequences of 32 tokens)."""
    root = tmp_path_factory.mktemp("text")
    datagen.make(datagen.parse_spec({"kind": "bert", "partitions": 3, "partition_samples": 70, "seq_len": 32,
                                     "max_predictions": 5}, "test"), root)
    return root


@pytest.fixture(params=BACKENDS)
def store(request, dataset, tmp_path, monkeypatch):
    """The image dataset uploaded to a fresh location on the backend; returns the Store reading it."""
    return store_on(request, request.param, dataset, tmp_path, monkeypatch)


@pytest.fixture(params=BACKENDS)
def text_store(request, text_dataset, tmp_path, monkeypatch):
    """The BERT partitions uploaded to a fresh location on the backend; returns the Store reading them."""
    return store_on(request, request.param, text_dataset, tmp_path, monkeypatch)


def store_on(request, name, dataset, tmp_path, monkeypatch):
    bucket = f"rosetta-{uuid.uuid4().hex[:10]}"
    if name == "nfs":
        url, disk = nfs_dataset(dataset, request.getfixturevalue("nfs_server"))
        store = storage.Store("nfs", {"url": url})
        store.disk_root = str(disk)
        return store
    if name == "nfs_mounted":  # what a cluster's mounted NFS folder looks like to the harness: a path
        storage.upload(dataset, "local", {"url": str(tmp_path / "mnt")})
        return storage.Store("nfs", {"url": str(tmp_path / "mnt")})
    if name in ("s3", "cached"):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        endpoint = request.getfixturevalue("s3_endpoint")
        options = {"url": f"s3://{bucket}/imagenet", "endpoint_url": endpoint}
        remote = storage.Store("s3", options)
        remote.fs.mkdir(bucket)
    elif name == "blob":
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", request.getfixturevalue("blob_connection"))
        options = {"url": f"abfs://{bucket}/imagenet"}
        storage.Store("blob", options).fs.mkdir(bucket)
    else:
        options = {"url": str(tmp_path / "remote")}
    storage.upload(dataset, "s3" if name == "cached" else name, options)
    if name == "cached":
        options = {**options, "remote": "s3", "cache_dir": str(tmp_path / "cache")}
    return storage.Store(name, options)


def manifest_of(store):
    return datagen.read_manifest(store.read(datagen.MANIFEST), store.url(datagen.MANIFEST))


def test_reads_every_object_with_the_manifest_bytes(store):
    manifest = manifest_of(store)
    for obj in manifest["objects"]:
        data = store.read(obj["path"])
        assert hashlib.sha256(data).hexdigest() == obj["sha256"]
    assert store.reads == len(manifest["objects"]) + 1
    assert store.bytes_read >= sum(o["bytes"] for o in manifest["objects"])


def test_missing_object_names_backend_and_object(store):
    with pytest.raises(storage.StorageError, match=rf"storage {store.backend}: object .*no/such\.jpg"):
        store.read("no/such.jpg")


def test_store_survives_pickling_into_loader_workers(store):
    import pickle

    copy = pickle.loads(pickle.dumps(store))
    assert copy.read(datagen.MANIFEST) == store.read(datagen.MANIFEST)


def test_corrupted_object_fails_verification_naming_backend_and_object(store):
    manifest = manifest_of(store)
    victim = manifest["samples"][0]["file"]
    good = store.read(victim)
    server_write(store, victim, good[: len(good) // 2])  # truncate the real object on the server
    fresh = storage.Store(store.backend, {**store.options, "cache_dir": store.options.get("cache_dir", "") + "-cold"}
                          if store.backend == "cached" else store.options)
    verifier = storage.Verifier({s["file"]: s["sha256"] for s in manifest["samples"]}, fraction=1.0)
    with pytest.raises(storage.StorageError, match=rf"storage {store.backend}: object .*{victim}.* checksum"):
        verifier.check(fresh, victim, fresh.read(victim))


def test_sampled_verification_checks_the_chosen_fraction():
    checksums = {f"f{i}": hashlib.sha256(str(i).encode()).hexdigest() for i in range(100)}
    assert len(storage.Verifier(checksums, 0.1, seed=1).expected) == 10
    assert storage.Verifier(checksums, 0.1, seed=1).expected == storage.Verifier(checksums, 0.1, seed=1).expected
    assert storage.Verifier(checksums, 0.0).expected == {}


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


def test_nfs_contexts_opened_together_are_separate_nfsv4_clients(dataset, nfs_server):
    """Two contexts one process opens back to back (tf.data's loader threads do): with libnfs's default
    client name, the same for both within a second, the second's SETCLIENTID expired the first one's state."""
    from harness.storage.nfs_fs import NFSFileSystem

    url, disk = nfs_dataset(dataset, nfs_server)
    first, second = NFSFileSystem(url), NFSFileSystem(url)
    root, manifest = storage.strip_protocol(url), (disk / datagen.MANIFEST).read_bytes()
    for fs in (first, second, first):
        assert fs.cat_file(f"{root}/{datagen.MANIFEST}") == manifest


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


def test_copy_to_local_stages_every_object(store, tmp_path):
    manifest = manifest_of(store)
    rels = [o["path"] for o in manifest["objects"]]
    seconds = storage.copy_to_local(store, rels, tmp_path / "staged")
    assert seconds > 0
    local = storage.Store("local", {"url": str(tmp_path / "staged")})
    assert all(hashlib.sha256(local.read(o["path"])).hexdigest() == o["sha256"] for o in manifest["objects"])


def test_tar_shards_stream_through_the_store_with_their_checksums(store):
    """The shard layout read as the input pipeline reads it: tarfile over the backend's file object."""
    manifest = manifest_of(store)
    verifier = storage.Verifier({s["path"]: s["sha256"] for s in manifest["shards"]}, fraction=1.0)
    keys = []
    for shard in manifest["shards"]:
        with store.open(shard["path"], digest=True) as reader, tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                payload = tar.extractfile(member).read()
                if member.name.endswith(".jpg"):
                    keys.append(member.name[:-4])
                    sample = manifest["samples"][int(member.name[:-4])]
                    assert hashlib.sha256(payload).hexdigest() == sample["sha256"]
            while reader.read(1 << 16):  # the archive's end padding
                pass
            verifier.check_digest(store, shard["path"], reader.hash.hexdigest(), reader.size)
            assert reader.size == shard["bytes"]
    assert keys == [s["key"] for s in manifest["samples"]] and verifier.verified == len(manifest["shards"])
    assert store.bytes_read >= sum(s["bytes"] for s in manifest["shards"])


def test_bert_partitions_stream_in_blocks_and_verify(text_store):
    manifest = manifest_of(text_store)
    assert manifest["kind"] == "bert"
    spec = manifest["spec"]
    for part in manifest["partitions"]:
        with text_store.open(part["path"], digest=True) as reader:
            blocks = list(textdata.iter_blocks(reader, spec["seq_len"], spec["max_predictions"], spec["vocab_size"],
                                               block=32))
            assert [len(b) for b in blocks] == [32, 32, 6]
            assert reader.hash.hexdigest() == part["sha256"] and reader.size == part["bytes"]
    assert text_store.reads == len(manifest["partitions"]) + 1


def test_corrupted_partition_fails_its_checksum_naming_backend_and_object(text_store):
    manifest = manifest_of(text_store)
    victim = manifest["partitions"][1]["path"]
    good = bytearray(text_store.read(victim))
    good[-10] ^= 0x01  # one bit of one record: still valid records, wrong bytes
    server_write(text_store, victim, bytes(good))
    fresh = storage.Store(text_store.backend, {**text_store.options, "cache_dir": text_store.options.get("cache_dir", "")
                                              + "-cold"} if text_store.backend == "cached" else text_store.options)
    verifier = storage.Verifier({p["path"]: p["sha256"] for p in manifest["partitions"]}, fraction=1.0)
    with fresh.open(victim, digest=True) as reader:
        while reader.read(1 << 16):
            pass
    with pytest.raises(storage.StorageError, match=rf"storage {text_store.backend}: object .*{victim}.* checksum"):
        verifier.check_digest(fresh, victim, reader.hash.hexdigest(), reader.size)


def test_streaming_a_missing_object_names_backend_and_object(store):
    with pytest.raises(storage.StorageError, match=rf"storage {store.backend}: object .*no/such\.tar"):
        store.open("no/such.tar").read()


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
