import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from harness.base.environment import own_tools_first
from harness.storage import backends as storage, servers as storage_servers

# As `rosetta` does: the environment's own mpirun, horovodrun, torchrun first, for the tests' checks
# (shutil.which) and every process they start, whether or not the environment was activated.
own_tools_first()

TINY = """
name = "tiny"
[settings]
warmup_steps = 1
measured_steps = 3
repeats = 1
timeout_s = 240
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
procs_per_node = [1, 2]
batch_per_worker = 2
"""


@pytest.fixture
def write_scenario(tmp_path: Path):
    """Write a scenario file from TOML text and return its path."""

    def write(text: str, name: str = "scenario.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture(scope="module")
def image_files(tmp_path_factory):
    """12 small JPEGs in 3 classes, one file each (rosetta data make's files layout), per test module."""
    from harness.storage import datagen

    root = tmp_path_factory.mktemp("imagenet")
    datagen.make(datagen.parse_spec({"count": 12, "classes": 3, "min_kb": 5, "max_kb": 20, "layout": "files"},
                                    "test"), root)
    return root


S3_KEY, S3_SECRET = "rosetta-test", "rosetta-test-secret-value"


@dataclass(frozen=True)
class S3Bucket:
    """The bucket `bench` on a SeaweedFS server; its credentials are in the test's environment."""

    endpoint: str
    secret: str = S3_SECRET

    def upload(self, root: Path, name: str) -> str:
        """Copy the dataset folder ``root`` to s3://bench/<name>; returns that url."""
        url = f"s3://bench/{name}"
        storage.upload(root, "s3", {"url": url, "endpoint_url": self.endpoint})
        return url


@pytest.fixture
def s3_bucket(tmp_path, monkeypatch):
    """SeaweedFS on 127.0.0.1 with an empty bucket `bench`, stopped after the test (skipped with the
    reason where it cannot start)."""
    try:
        with storage_servers.seaweedfs(tmp_path / "weed", S3_KEY, S3_SECRET) as endpoint:
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_KEY)
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET)
            storage.Store("s3", {"url": "s3://bench/x", "endpoint_url": endpoint}).fs.mkdir("bench")
            yield S3Bucket(endpoint)
    except storage_servers.Unavailable as exc:
        pytest.skip(f"S3 server (SeaweedFS) unavailable: {exc}")


@pytest.fixture
def libnfs_client():
    """The user-space NFS client, or a skip naming how to get it."""
    try:
        import libnfs  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"NFS client libnfs unavailable (apt-get install libnfs-dev, then make test builds it): {exc}")


@pytest.fixture
def nfs_images(image_files, tmp_path, libnfs_client):
    """``image_files`` exported by NFS-Ganesha over NFSv4 on 127.0.0.1; yields the dataset's nfs:// url,
    read through libnfs (nothing mounted). Skipped with the reason where either is missing."""
    export = tmp_path / "export"
    shutil.copytree(image_files, export / "imagenet")
    try:
        with storage_servers.nfs_ganesha(export, tmp_path / "ganesha") as url:
            yield f"{url}/imagenet"
    except storage_servers.Unavailable as exc:
        pytest.skip(f"NFS server (NFS-Ganesha) unavailable: {exc}")


@dataclass(frozen=True)
class NFSExport:
    """A writable export of the dataset, served over both protocols: each one's storage options, and the
    dataset's folder on the server's disk."""

    v4: dict
    v3: dict
    disk: Path


@pytest.fixture
def nfs_export(image_files, tmp_path, libnfs_client):
    """``image_files`` exported read-write by NFS-Ganesha over NFSv4 and NFSv3 on 127.0.0.1 (NFSv3 with a
    stand-in for rpcbind, in a mount namespace of its own); yields an :class:`NFSExport`. Skipped with
    the reason where the server cannot start."""
    export = tmp_path / "export"
    shutil.copytree(image_files, export / "imagenet")
    mount_port = storage_servers.free_port()
    try:
        with storage_servers.nfs_ganesha(export, tmp_path / "ganesha", nfsv3_mount_port=mount_port,
                                         writable=True) as url:
            v3 = {"url": f"nfs://127.0.0.1:{urlsplit(url).port}{export.resolve()}/imagenet", "nfs_version": 3,
                  "nfs_mount_port": mount_port}  # NFSv3 mounts the export by its path on the server
            yield NFSExport({"url": f"{url}/imagenet"}, v3, export / "imagenet")
    except storage_servers.Unavailable as exc:
        pytest.skip(f"NFS server (NFS-Ganesha, NFSv3 and v4) unavailable: {exc}")


@pytest.fixture
def juicefs(s3_bucket, tmp_path):
    """A JuiceFS volume in SeaweedFS (bucket `jfs`) served as S3 by `juicefs gateway` on 127.0.0.1: a
    function ``start(fresh_cache=True)`` returning a context manager that yields the JuiceFSGateway (the
    same volume each time; a fresh start empties its block cache). Skipped with the reason where JuiceFS
    cannot start."""
    bucket_url = s3_bucket.endpoint + "/jfs"

    def start(fresh_cache: bool = True):
        return storage_servers.juicefs_gateway(tmp_path / "juicefs", bucket_url, S3_KEY, S3_SECRET,
                                               cache_mb=256, fresh_cache=fresh_cache)
    try:
        with start():
            pass
    except storage_servers.Unavailable as exc:
        pytest.skip(f"cache tier (JuiceFS gateway) unavailable: {exc}")
    return start


@pytest.fixture
def blob_container(tmp_path, monkeypatch):
    """Azurite on 127.0.0.1 with an empty container `bench`, its connection string in the test's
    environment; yields an ``upload(root, name)`` returning the abfs:// url (skipped where Azurite is absent)."""
    try:
        with storage_servers.azurite(tmp_path / "azurite") as connection:
            monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
            storage.Store("blob", {"url": "abfs://bench/x"}).fs.mkdir("bench")

            def upload(root: Path, name: str) -> str:
                url = f"abfs://bench/{name}"
                storage.upload(root, "blob", {"url": url})
                return url
            yield upload
    except storage_servers.Unavailable as exc:
        pytest.skip(f"Blob server (Azurite) unavailable: {exc}")
