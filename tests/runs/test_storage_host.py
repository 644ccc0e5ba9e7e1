"""Storage servers on a storage host behind a capped link (testbed/storage_host.py): an object read
from this machine takes about its size over the cap, and far less once the cap is lifted.

Needs root and iproute2 (a network namespace and tc), else skipped with the reason; each server skips
with its own reason where it cannot start.
"""

import secrets
import subprocess
import time
from urllib.parse import urlsplit

import pytest

from harness.base import network
from testbed import servers, storage_host
from tests.conftest import S3_KEY, S3_SECRET

CAP = "50mbit"
SIZE = 6_000_000  # bytes: 0.96 s at the cap, a few hundredths of a second without it


@pytest.fixture(scope="module")
def host():
    try:
        with storage_host.storage_host(CAP) as made:
            yield made
    except storage_host.Unavailable as exc:
        pytest.skip(str(exc))


def capped_then_free(host, read) -> tuple[float, float]:
    """Seconds ``read()`` takes at the cap and with the cap lifted (the cap restored after)."""
    times = []
    for rate in (CAP, network.UNLIMITED):
        host.cap(rate)
        start = time.monotonic()
        assert len(read()) == SIZE
        times.append(time.monotonic() - start)
    host.cap(CAP)
    return times[0], times[1]


def assert_capped(capped: float, free: float) -> None:
    expected = SIZE * 8 / network.bits_per_s(CAP)
    # loose: the cap bounds the time from below (a little less: tbf's first burst), load stretches it
    assert 0.7 * expected < capped < 3 * expected, (capped, expected)
    assert free < capped / 3, (free, capped)


def test_s3_get_through_the_capped_link_takes_size_over_rate(host, tmp_path):
    botocore = pytest.importorskip("botocore.session")
    try:
        with servers.seaweedfs(tmp_path / "weed", S3_KEY, S3_SECRET, host=host) as endpoint:
            assert urlsplit(endpoint).hostname == host.address
            client = botocore.get_session().create_client(
                "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=S3_KEY,
                aws_secret_access_key=S3_SECRET)
            client.create_bucket(Bucket="capped")
            body = secrets.token_bytes(SIZE)
            start = time.monotonic()
            client.put_object(Bucket="capped", Key="object", Body=body)  # the other direction: capped too
            assert_capped(time.monotonic() - start, 0.0)
            capped, free = capped_then_free(host, lambda: client.get_object(Bucket="capped", Key="object")["Body"].read())
    except servers.Unavailable as exc:
        pytest.skip(f"SeaweedFS unavailable: {exc}")
    assert_capped(capped, free)


def test_nfsv3_read_through_the_capped_link_takes_size_over_rate(host, tmp_path, libnfs_client):
    from harness.storage import nfs_fs

    export = tmp_path / "export"
    export.mkdir()
    (export / "object").write_bytes(secrets.token_bytes(SIZE))
    mount_port = servers.free_port()
    try:
        with servers.nfs_ganesha(export, tmp_path / "ganesha", nfsv3_mount_port=mount_port, host=host) as url:
            port = urlsplit(url).port
            root = f"nfs://{host.address}:{port}{export.resolve()}"
            fs = nfs_fs.NFSFileSystem(root, version=3, mount_port=mount_port)
            capped, free = capped_then_free(host, lambda: fs.cat_file(f"{root}/object"))
    except servers.Unavailable as exc:
        pytest.skip(f"NFS-Ganesha unavailable: {exc}")
    assert_capped(capped, free)


def test_blob_download_through_the_capped_link_takes_size_over_rate(host, tmp_path):
    blob = pytest.importorskip("azure.storage.blob")
    try:
        with servers.azurite(tmp_path / "azurite", host=host) as connection:
            container = blob.BlobServiceClient.from_connection_string(connection).create_container("capped")
            host.cap(network.UNLIMITED)  # the upload is not what this test times
            container.upload_blob("object", secrets.token_bytes(SIZE))
            capped, free = capped_then_free(host, lambda: container.download_blob("object").readall())
    except servers.Unavailable as exc:
        pytest.skip(f"Azurite unavailable: {exc}")
    assert_capped(capped, free)


def test_the_host_and_its_link_are_gone_afterwards():
    try:
        with storage_host.storage_host() as made:
            assert made.name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    except storage_host.Unavailable as exc:
        pytest.skip(str(exc))
    assert made.name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert f" {made.root_interface}@" not in links and f" {made.root_interface}:" not in links
