"""An fsspec file system over libnfs: ``nfs://host[:port]/export/path`` read and written without mounting.

On a cluster NFS is usually a mounted folder (the ``local`` backend reads it); this is for places that
cannot mount (unprivileged containers, and this machine, whose kernel has no NFS client). libnfs is a
user-space NFS client (C library ``libnfs``, Python binding ``libnfs`` from PyPI, built against it).

One instance mounts one directory (the dataset root, given at construction) and reads paths below it;
paths are fsspec-style, ``host[:port]/export/path/<rel>``. Not thread-safe (one libnfs context), and not
shared between processes: each process (DataLoader worker) opens its own (``cachable = False``). libnfs
caches nothing unless asked (its page cache and read-ahead are off by default and never turned on here).

Writes (``pipe_file``, ``open(path, "wb")``: a checkpoint) are whole objects, made durable before they
return: the data is sent UNSTABLE, then COMMIT (``nfs_fsync``) has the server put it on its disk, which
is NFS's fsync. Prefer NFSv3 for writes: libnfs 4.0 (Debian 12's) writes NFSv3 at full size (it splits a
write into the server's wtmax, 1 MiB from Ganesha, and sends the pieces at once), but encodes every NFSv4
call into a fixed 4096-byte buffer, so an NFSv4 WRITE above ~3.9 KB of data fails before it is sent
("ZDR error: Failed to encode COMPOUND4args"; ``nfs_get_writemax`` reads 0 because only NFSv3's FSINFO
sets it; fixed in libnfs 5.0, sahlberg/libnfs#319). NFSv4 therefore writes in 3 KB pieces, one round
trip each: 17-57 MB/s against NFS-Ganesha on loopback here, where NFSv3 wrote 200-600 MB/s (COMMIT
included; benchmarks/RESULTS.md).
"""

from __future__ import annotations

import ctypes
import errno
import io
import itertools
import os
import stat
import uuid
import warnings
from urllib.parse import urlsplit

from fsspec import AbstractFileSystem

# one READ is at most the server's rsize (often 1 MiB); libnfs splits larger ones, but a short read
# can still come back, so reads loop until the object is complete
_CHUNK = 1 << 20
# NFSv4 WRITE data per call with libnfs 4.0 (see above): 1 KB of its 4 KB buffer is left for the RPC
# header, the AUTH_SYS credential (a host name of up to 255 bytes) and the file handle (up to 128)
_V4_WRITE_PIECE = 3072
_V3_WRITE_PIECE = 8 << 20  # per nfs_pwrite call: libnfs splits it into wtmax pieces sent together
_CONTEXTS = itertools.count()


def _own_nfs4_client(context) -> None:
    """Make the libnfs ``context`` an NFSv4 client of its own. libnfs names every context "Libnfs
    pid:<pid> <second>" and draws its verifier from a finer clock (its init.c), so two contexts a process opens
    within one second (tf.data's loader threads, each with its own) share a name but not a verifier: the
    server takes the second for the first client rebooted and expires the first one's state, whose next
    read fails with NFS4ERR_EXPIRED (seen on a loaded machine). The Python binding does not wrap
    ``nfs4_set_client_name``; ctypes reaches it through the binding's own library."""
    from libnfs import _libnfs

    set_name = ctypes.CDLL(_libnfs.__file__).nfs4_set_client_name
    set_name.argtypes, set_name.restype = [ctypes.c_void_p, ctypes.c_char_p], None
    set_name(int(context), f"rosetta pid:{os.getpid()} context:{next(_CONTEXTS)} {uuid.uuid4().hex}".encode())


class NFSFileSystem(AbstractFileSystem):
    protocol = "nfs"
    cachable = False  # a libnfs context belongs to the process (and thread) that opened it

    def __init__(self, url: str, version: int = 4, mount_port: int = 0, **kwargs):
        """``url``: ``nfs://host[:port]/dir`` (the directory mounted); ``version``: NFS protocol 3 or 4.
        NFSv4 needs only the server's NFS port; NFSv3 also asks the server's rpcbind for MOUNT (as
        mount.nfs does) unless ``mount_port`` is given."""
        super().__init__(**kwargs)
        with warnings.catch_warnings():  # its SWIG loader imports `imp` (deprecated; gone in Python 3.12)
            warnings.simplefilter("ignore", DeprecationWarning)
            import libnfs.libnfs as nfs  # the SWIG module: the package's wrapper ignores errors of mount/read

        self._nfs = nfs
        parts = urlsplit(url)
        if parts.scheme != "nfs" or not parts.hostname:
            raise ValueError(f"nfs: {url!r} is not nfs://host[:port]/path")
        self.prefix = self._strip_protocol(url)  # fsspec paths below this are read relative to the mount
        query = [f"version={int(version)}"] + ([f"nfsport={parts.port}"] if parts.port else [])
        query += [f"mountport={int(mount_port)}"] if mount_port and int(version) == 3 else []
        self.version = int(version)
        self.url = url
        self._ctx = nfs.nfs_init_context()
        _own_nfs4_client(self._ctx)
        parsed = nfs.nfs_parse_url_dir(self._ctx, f"nfs://{parts.hostname}{parts.path or '/'}?{'&'.join(query)}")
        if parsed is None:
            raise ValueError(f"nfs: cannot parse {url!r}: {nfs.nfs_get_error(self._ctx)}")
        status = nfs.nfs_mount(self._ctx, parsed.server, parsed.path)
        nfs.nfs_destroy_url(parsed)
        if status != 0:
            raise ConnectionError(f"mounting {url} (NFSv{version}) failed: {self._error(status)}")

    def __del__(self):
        ctx, self._ctx = getattr(self, "_ctx", None), None
        if ctx is not None:
            self._nfs.nfs_destroy_context(ctx)

    def _error(self, status: int) -> str:
        return (self._nfs.nfs_get_error(self._ctx) or "").splitlines()[0] if status else ""

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        return (path[len("nfs://"):] if path.startswith("nfs://") else path).rstrip("/")

    def _rel(self, path: str) -> str:
        """The path inside the mounted directory (``/`` is the mount itself)."""
        path = self._strip_protocol(path)
        if path == self.prefix:
            return "/"
        if not path.startswith(self.prefix + "/"):
            raise ValueError(f"nfs: {path} is outside the mounted {self.prefix}")
        return path[len(self.prefix):]

    def _check(self, status: int, path: str) -> None:
        if status == -errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, "no such object", path)
        if status < 0:
            raise OSError(-status, f"nfs: {path}: {self._error(status)}")

    def info(self, path, **kwargs):
        st = self._nfs.nfs_stat_64()
        self._check(self._nfs.nfs_stat64(self._ctx, self._rel(path), st), path)
        kind = "directory" if stat.S_ISDIR(st.nfs_mode) else "file"
        return {"name": self._strip_protocol(path), "size": st.nfs_size, "type": kind, "mtime": st.nfs_mtime}

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        handle = self._nfs.new_NFSDirHandle()
        self._check(self._nfs.nfs_opendir(self._ctx, self._rel(path), handle), path)
        handle = self._nfs.NFSDirHandle_value(handle)
        entries = []
        try:
            while (entry := self._nfs.nfs_readdir(self._ctx, handle)) is not None:
                if entry.name not in (".", ".."):
                    kind = "directory" if stat.S_ISDIR(entry.mode) else "file"
                    entries.append({"name": f"{path}/{entry.name}", "size": entry.size, "type": kind})
        finally:
            self._nfs.nfs_closedir(self._ctx, handle)
        return entries if detail else [e["name"] for e in entries]

    def cat_file(self, path, start=None, end=None, **kwargs):
        """The object's bytes (``start``/``end`` as in fsspec: a byte range, negatives from the end)."""
        nfs, rel = self._nfs, self._rel(path)
        st = nfs.nfs_stat_64()
        self._check(nfs.nfs_stat64(self._ctx, rel, st), path)
        size = st.nfs_size
        start = 0 if start is None else (max(size + start, 0) if start < 0 else min(start, size))
        end = size if end is None else (max(size + end, 0) if end < 0 else min(end, size))
        handle = nfs.new_NFSFileHandle()
        self._check(nfs.nfs_open(self._ctx, rel, 0, handle), path)  # 0: O_RDONLY
        handle = nfs.NFSFileHandle_value(handle)
        out = bytearray(max(end - start, 0))
        try:
            done = 0
            while done < len(out):
                chunk = bytearray(min(_CHUNK, len(out) - done))
                got = nfs.nfs_pread(self._ctx, handle, start + done, len(chunk), chunk)
                self._check(got, path)
                if got == 0:  # the object shrank since stat: return what it holds, as a local read would
                    break
                out[done:done + got] = chunk[:got]
                done += got
        finally:
            nfs.nfs_close(self._ctx, handle)
        return bytes(out[:done])

    def _open(self, path, mode="rb", **kwargs):
        if mode == "wb":
            return _Upload(self, path)
        if mode != "rb":
            raise NotImplementedError(f"nfs: mode {mode!r}: whole objects only (rb, wb)")
        buffer = io.BytesIO(self.cat_file(path))
        buffer.name = self._strip_protocol(path)
        return buffer

    def mkdir(self, path, create_parents=True, **kwargs):
        parts = [p for p in self._rel(path).split("/") if p]
        for depth in range(0 if create_parents else len(parts) - 1, len(parts)):
            status = self._nfs.nfs_mkdir(self._ctx, "/" + "/".join(parts[:depth + 1]))
            if status not in (0, -errno.EEXIST):  # EEXIST: made already (by another rank, say)
                self._check(status, path)

    def makedirs(self, path, exist_ok=False):
        if not exist_ok and self.exists(path):
            raise FileExistsError(errno.EEXIST, "exists", path)
        self.mkdir(path, create_parents=True)

    def pipe_file(self, path, value, **kwargs):
        """Write ``value`` (bytes) as the object ``path`` (its folders made), durable on the server's disk
        when this returns (COMMIT, NFS's fsync)."""
        nfs, rel = self._nfs, self._rel(path)
        if "/" in rel.strip("/"):
            self.mkdir(path.rsplit("/", 1)[0])
        handle = nfs.new_NFSFileHandle()
        status = nfs.nfs_create(self._ctx, rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, handle)
        if status == -errno.EEXIST:  # libnfs' NFSv4 create is exclusive: an old object is opened and truncated
            status = nfs.nfs_open(self._ctx, rel, os.O_WRONLY | os.O_TRUNC, handle)
        self._check(status, path)
        handle = nfs.NFSFileHandle_value(handle)
        piece = _V3_WRITE_PIECE if self.version == 3 else _V4_WRITE_PIECE
        data = memoryview(value)
        try:
            done = 0
            while done < len(data):
                chunk = bytearray(data[done:done + piece])  # the binding takes a bytearray
                wrote = nfs.nfs_pwrite(self._ctx, handle, done, len(chunk), chunk)
                self._check(wrote, path)
                if wrote == 0:
                    raise OSError(errno.EIO, f"nfs: {path}: the server took no bytes at offset {done}")
                done += wrote
            self._check(nfs.nfs_fsync(self._ctx, handle), path)
        finally:
            nfs.nfs_close(self._ctx, handle)

    def rm_file(self, path):
        self._check(self._nfs.nfs_unlink(self._ctx, self._rel(path)), path)

    def ukey(self, path):
        info = self.info(path)
        return f"{info['name']}:{info['size']}:{info['mtime']}"


class _Upload(io.BytesIO):
    """``open(path, "wb")``: the bytes are held and written (durably) as one object on close."""

    def __init__(self, fs: NFSFileSystem, path: str):
        super().__init__()
        self.fs, self.path = fs, path

    def close(self):
        if not self.closed:
            self.fs.pipe_file(self.path, self.getvalue())
        super().close()
