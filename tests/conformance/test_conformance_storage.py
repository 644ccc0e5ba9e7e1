"""One suite every storage backend declared in harness.contract.axes.Storage passes, each against its real
server on 127.0.0.1, as fsspec's abstract tests run over its file systems: a new backend is picked up by
itself and needs only its site in testbed/storage_sites.py (a declared backend without one fails here).

local: a folder; nfs: NFS-Ganesha exporting a folder over NFSv4, read (and written) through libnfs, nothing
mounted; nfs_mounted: an NFS url that is a plain path (a mounted NFS folder on a cluster), read like local;
s3: SeaweedFS; blob: Azurite; cached, cached_warm: fsspec's filecache in front of SeaweedFS; juicefs,
juicefs_warm: a JuiceFS gateway in front of SeaweedFS. A server that cannot start here skips its
backend's tests with the reason. What only one backend does (NFS's own client, the cache's second read)
is tests/unit/storage/test_storage.py's.
"""

import hashlib
import pickle
import random
import tarfile

import pytest

from harness.contract.axes import Storage
from harness.storage import backends as storage, datagen, textdata
from testbed.storage_sites import SITES, VARIANTS, StorageBed, Unavailable

DECLARED = [s.value for s in Storage if s.kind.client]  # every backend that reads data
SITE_NAMES = [*DECLARED, *VARIANTS]


def test_every_declared_backend_has_a_site_and_nothing_else_does():
    assert sorted(SITES) == sorted(DECLARED), "a site per backend in testbed/storage_sites.py's SITES"
    assert sorted(storage.REGISTRY) == sorted(DECLARED), "the backend registry is the declaration's"


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    started = StorageBed(tmp_path_factory.mktemp("servers"))
    yield started
    started.close()


@pytest.fixture(scope="module")
def text_dataset(tmp_path_factory):
    """Pre-tokenized BERT partitions (3 x 70 sequences of 32 tokens)."""
    root = tmp_path_factory.mktemp("text")
    datagen.make(datagen.parse_spec({"kind": "bert", "partitions": 3, "partition_samples": 70, "seq_len": 32,
                                     "max_predictions": 5}, "test"), root)
    return root


@pytest.fixture(params=SITE_NAMES)
def backend(request):
    return request.param


def _site(bed, backend, monkeypatch):
    try:
        made = bed.site(backend)
    except Unavailable as exc:
        pytest.skip(f"storage {backend}: its server is unavailable here: {exc}")
    for key, value in made.env.items():
        monkeypatch.setenv(key, value)
    return made


@pytest.fixture
def site(bed, backend, monkeypatch):
    """A fresh, empty site on the backend's real server, its credentials in the test's environment."""
    return _site(bed, backend, monkeypatch)


@pytest.fixture(scope="module")
def uploaded():
    """Sites already holding a dataset, by (backend, dataset): the tests that only read share one."""
    return {}


def _shared(bed, backend, root, uploaded, monkeypatch, tmp_path):
    """A Store reading ``root`` on the backend, uploaded once per module; a fresh (cold) cache where it has one."""
    if (backend, root) not in uploaded:
        made = _site(bed, backend, monkeypatch)
        made.upload(root)
        uploaded[backend, root] = made
    made = uploaded[backend, root]
    for key, value in made.env.items():
        monkeypatch.setenv(key, value)
    options = made.options
    if "cache_dir" in options:
        options = {**options, "cache_dir": str(tmp_path / "cache")}
    return storage.Store(made.backend, options)


@pytest.fixture
def store(bed, backend, dataset, uploaded, monkeypatch, tmp_path):
    """The image dataset on the backend (shared by the tests that only read); a Store reading it."""
    return _shared(bed, backend, dataset, uploaded, monkeypatch, tmp_path)


@pytest.fixture
def text_store(bed, backend, text_dataset, uploaded, monkeypatch, tmp_path):
    """The BERT partitions on the backend (shared by the tests that only read); a Store reading them."""
    return _shared(bed, backend, text_dataset, uploaded, monkeypatch, tmp_path)


@pytest.fixture
def own_store(site, dataset):
    """The image dataset on a site of this test's own (it may change what the server holds)."""
    site.upload(dataset)
    return site.store()


@pytest.fixture
def own_text_store(site, text_dataset):
    """The BERT partitions on a site of this test's own."""
    site.upload(text_dataset)
    return site.store()


def cold(store):
    """A Store on the same site that has not read anything yet (an empty cache, where it has one)."""
    options = store.options
    if "cache_dir" in options:
        options = {**options, "cache_dir": options["cache_dir"] + "-cold"}
    return storage.Store(store.backend, options)


def manifest_of(store):
    return datagen.read_manifest(store.read(datagen.MANIFEST), store.url(datagen.MANIFEST))


@pytest.mark.runs
def test_writes_then_lists_and_reads_back_what_it_wrote(site):
    """What the checkpoint phase does on the same backend: write objects, list the folder, read them."""
    store = site.store()
    data = {f"ckpt/{i}.bin": random.Random(i).randbytes(3000 + 5000 * i) for i in range(3)}
    for rel, payload in data.items():
        store.fs.pipe_file(f"{store.root}/{rel}", payload)
    listed = sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in store.fs.ls(f"{store.root}/ckpt", detail=False))
    assert listed == ["0.bin", "1.bin", "2.bin"]
    fresh = cold(store)
    assert {rel: fresh.read(rel) for rel in data} == data
    assert fresh.bytes_read == sum(len(p) for p in data.values()) and fresh.reads == len(data)


@pytest.mark.runs
def test_reads_every_object_with_the_manifest_bytes(store):
    manifest = manifest_of(store)
    for obj in manifest["objects"]:
        data = store.read(obj["path"])
        assert hashlib.sha256(data).hexdigest() == obj["sha256"]
    assert store.reads == len(manifest["objects"]) + 1
    assert store.bytes_read >= sum(o["bytes"] for o in manifest["objects"])


@pytest.mark.runs
def test_missing_object_names_backend_and_object(store):
    with pytest.raises(storage.StorageError, match=rf"storage {store.backend}: object .*no/such\.jpg"):
        store.read("no/such.jpg")


@pytest.mark.runs
def test_store_survives_pickling_into_loader_workers(store):
    copy = pickle.loads(pickle.dumps(store))
    assert copy.read(datagen.MANIFEST) == store.read(datagen.MANIFEST)


@pytest.mark.runs
def test_corrupted_object_fails_verification_naming_backend_and_object(site, own_store):
    store = own_store
    manifest = manifest_of(store)
    victim = manifest["samples"][0]["file"]
    good = store.read(victim)
    site.write_direct(victim, good[: len(good) // 2])  # truncate the real object on the server
    fresh = cold(store)
    verifier = storage.Verifier({s["file"]: s["sha256"] for s in manifest["samples"]}, fraction=1.0)
    with pytest.raises(storage.StorageError, match=rf"storage {store.backend}: object .*{victim}.* checksum"):
        verifier.check(fresh, victim, fresh.read(victim))


@pytest.mark.runs
def test_copy_to_local_stages_every_object(store, tmp_path):
    manifest = manifest_of(store)
    rels = [o["path"] for o in manifest["objects"]]
    seconds = storage.copy_to_local(store, rels, tmp_path / "staged")
    assert seconds > 0
    local = storage.Store("local", {"url": str(tmp_path / "staged")})
    assert all(hashlib.sha256(local.read(o["path"])).hexdigest() == o["sha256"] for o in manifest["objects"])


@pytest.mark.runs
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


@pytest.mark.runs
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


@pytest.mark.runs
def test_corrupted_partition_fails_its_checksum_naming_backend_and_object(site, own_text_store):
    text_store = own_text_store
    manifest = manifest_of(text_store)
    victim = manifest["partitions"][1]["path"]
    good = bytearray(text_store.read(victim))
    good[-10] ^= 0x01  # one bit of one record: still valid records, wrong bytes
    site.write_direct(victim, bytes(good))
    fresh = cold(text_store)
    verifier = storage.Verifier({p["path"]: p["sha256"] for p in manifest["partitions"]}, fraction=1.0)
    with fresh.open(victim, digest=True) as reader:
        while reader.read(1 << 16):
            pass
    with pytest.raises(storage.StorageError, match=rf"storage {text_store.backend}: object .*{victim}.* checksum"):
        verifier.check_digest(fresh, victim, reader.hash.hexdigest(), reader.size)


@pytest.mark.runs
def test_streaming_a_missing_object_names_backend_and_object(store):
    with pytest.raises(storage.StorageError, match=rf"storage {store.backend}: object .*no/such\.tar"):
        store.open("no/such.tar").read()
