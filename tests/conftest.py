import os
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from harness.base.environment import own_tools_first
from harness.storage import backends as storage
from testbed import servers as storage_servers
from tests.helpers.scenarios import tiny_scenario

# `make test` runs the test files in two processes (pytest-xdist, --dist loadfile): a file's tests stay in one
# process, one after another, so that its servers and data start once. What has a name on the whole machine
# gets one per process: the SLURM test cluster's network namespace and the namespace hosts.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... under xdist; empty in a lone pytest
SLURM_NETNS = "rosetta-slurm" + (WORKER and f"-{WORKER}")  # tools/slurm_cluster.sh's ROSETTA_SLURM_NETNS
HOSTS_PREFIX = "rosetta" + (WORKER and f"-{WORKER}")  # tools/netns_hosts.sh's ROSETTA_NETNS_PREFIX
REPO = Path(__file__).resolve().parents[1]
LAYERS = {"unit": "unit", "conformance": "conformance", "runs": "runs"}  # folder -> marker


def pytest_collection_modifyitems(items):
    """Each test carries its layer's marker (its folder's), and every test of tests/runs/ is a ``runs`` test:
    ``-m "not runs"`` is the layer that starts no process (make test-unit)."""
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        layer = LAYERS.get(parts[0]) if len(parts) > 1 else None
        if layer:
            item.add_marker(layer)
        if layer == "runs":
            item.add_marker("runs")


# As `rosetta` does: the environment's own mpirun, horovodrun, torchrun first, for the tests' checks
# (shutil.which) and every process they start, whether or not the environment was activated.
own_tools_first()


# Real engines (tests/runs/test_engines.py and each framework's SLURM and two-host tests): a one-node SLURM cluster
# and two hosts made of network namespaces, started here; they need root and Debian's packages
# (tools/system-packages.txt, which `make test` installs as root), else the tests skip saying so.
def need_root_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, SLURM daemons)")
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")


def start_engine(argv: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    if done.returncode != 0:
        pytest.skip(f"{' '.join(argv)} could not start: {(done.stderr or done.stdout).strip()[-300:]}")
    return done.stdout


IN_SLURM_NAMESPACE = ["ip", "netns", "exec", SLURM_NETNS]  # the SLURM cluster's namespace: its clients run in it


@pytest.fixture(scope="module")
def slurm_conf(tmp_path_factory):
    need_root_tools("slurmctld", "slurmd", "munged", "sbatch", "ip")
    state, env = tmp_path_factory.mktemp("slurm"), {**os.environ, "ROSETTA_SLURM_NETNS": SLURM_NETNS}
    lines = start_engine([str(REPO / "tools/slurm_cluster.sh"), "start", str(state)], env).splitlines()
    yield dict(line.split("=", 1) for line in lines)["SLURM_CONF"]
    subprocess.run([str(REPO / "tools/slurm_cluster.sh"), "stop", str(state)], check=False, env=env)


def namespace_hosts(count: int):
    """``count`` hosts made of network namespaces (tools/netns_hosts.sh): {name: address}, stopped after."""
    need_root_tools("ip", "tc", "mpirun")
    env = {**os.environ, "ROSETTA_NETNS_PREFIX": HOSTS_PREFIX}
    lines = start_engine([str(REPO / "tools/netns_hosts.sh"), "start", str(count)], env).splitlines()
    yield dict(line.split("=", 1) for line in lines)
    subprocess.run([str(REPO / "tools/netns_hosts.sh"), "stop"], check=False, env=env)


@pytest.fixture(scope="module")
def two_hosts():
    yield from namespace_hosts(2)


@pytest.fixture(scope="module")
def four_hosts():
    yield from namespace_hosts(4)


TINY = tiny_scenario(matrix={"procs_per_node": [1, 2]})  # real 1- and 2-process runs


@pytest.fixture
def write_scenario(tmp_path: Path):
    """Write a scenario file from TOML text and return its path."""

    def write(text: str, name: str = "scenario.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A small ImageNet-shaped dataset in both layouts (6 JPEGs of 2 classes, tar shards of 4): what the
    storage backends' tests upload to each server."""
    from harness.storage import datagen

    root = tmp_path_factory.mktemp("dataset")
    datagen.make(datagen.parse_spec({"count": 6, "classes": 2, "shard_samples": 4, "min_kb": 5, "max_kb": 20},
                                    "test"), root)
    return root


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
