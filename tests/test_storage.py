"""One test suite every storage backend passes, each against its real server on 127.0.0.1.

local: a folder; s3: SeaweedFS; blob: Azurite; cached: fsspec's filecache in front of SeaweedFS.
A server that cannot start here skips its backend's tests with the reason.
"""

import hashlib
import uuid

import pytest

from harness import datagen, storage
from harness.errors import UserError
from harness import storage_servers

ACCESS_KEY, SECRET_KEY = "rosetta-test", "rosetta-test-secret-value"


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


@pytest.fixture(params=["local", "s3", "blob", "cached"])
def store(request, dataset, tmp_path, monkeypatch):
    """The dataset uploaded to a fresh location on the backend; returns the Store reading it."""
    name = request.param
    bucket = f"rosetta-{uuid.uuid4().hex[:10]}"
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
    target = store.fs.fs if store.backend == "cached" else store.fs
    target.pipe_file(f"{store.root}/{victim}", good[: len(good) // 2])  # truncate the real object on the server
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
