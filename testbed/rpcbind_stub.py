"""A stand-in for rpcbind that only NFS-Ganesha talks to, so that it can serve NFSv3 on a shared machine.

Ganesha registers its NFSv3 and MOUNT services with rpcbind when it starts and exits if it cannot
("Cannot register NFS V3 on TCP"). rpcbind is a machine-wide daemon on port 111: starting one here would
hand every process on the machine (and the network) a port map, and this machine runs none. Ganesha's RPC
library (ntirpc) reaches rpcbind through its local socket ``/var/run/rpcbind.sock`` before trying port
111, so :func:`serving` answers on a socket in a private folder, which servers.nfs_ganesha bind-mounts
over ``/run`` in ganesha's own mount namespace: nothing else on the machine sees it.

The stub speaks just enough ONC RPC (RFC 5531, record marking over a stream) for registration: SET and
UNSET succeed and record nothing, NULL answers, GETADDR/GETPORT say "not registered". Clients are told
the ports instead (libnfs' URL arguments ``nfsport=`` and ``mountport=``), as a firewall-friendly mount
would be.
"""

from __future__ import annotations

import socketserver
import struct
import threading
from contextlib import contextmanager
from pathlib import Path

RPCBIND_PROGRAM = 100000
_LAST_FRAGMENT = 0x8000_0000
_SET, _UNSET, _GETADDR = 1, 2, 3  # the same numbers in portmap v2 and rpcbind v3/v4


def reply(call: bytes) -> bytes | None:
    """The reply to one RPC call message (without its record mark); None if it is not a call."""
    if len(call) < 24:
        return None
    xid, kind, _rpcvers, program, _version, procedure = struct.unpack(">6I", call[:24])
    if kind != 0:  # a REPLY sent to us: nothing to answer
        return None
    head = struct.pack(">5I", xid, 1, 0, 0, 0)  # REPLY, MSG_ACCEPTED, verifier AUTH_NONE of 0 bytes
    if program != RPCBIND_PROGRAM:
        return head + struct.pack(">I", 1)  # PROG_UNAVAIL
    if procedure == 0:
        return head + struct.pack(">I", 0)  # SUCCESS, void
    if procedure in (_SET, _UNSET):
        return head + struct.pack(">II", 0, 1)  # SUCCESS, TRUE
    if procedure == _GETADDR:
        return head + struct.pack(">II", 0, 0)  # SUCCESS, "" (v3/v4) or port 0 (v2): not registered
    return head + struct.pack(">I", 3)  # PROC_UNAVAIL


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while True:
            message = b""
            while True:  # a record is fragments up to the one marked last
                mark = self.rfile.read(4)
                if len(mark) < 4:
                    return
                (word,) = struct.unpack(">I", mark)
                message += self.rfile.read(word & ~_LAST_FRAGMENT)
                if word & _LAST_FRAGMENT:
                    break
            answer = reply(message)
            if answer is not None:
                self.wfile.write(struct.pack(">I", _LAST_FRAGMENT | len(answer)) + answer)
                self.wfile.flush()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@contextmanager
def serving(folder: Path):
    """The stub on ``folder/rpcbind.sock`` (the folder is what ganesha will see as /run), in a thread
    of this process until the block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rpcbind.sock"
    path.unlink(missing_ok=True)
    server = _Server(str(path), _Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        path.unlink(missing_ok=True)
