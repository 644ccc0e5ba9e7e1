"""A link's latency where the kernel has no ``netem``: every packet arriving through an interface is held for
a fixed time in a user-space delay line, then let go in order.

iptables' NFQUEUE target hands each packet arriving through the interface (mangle PREROUTING) to a queue
that this process reads over netlink (the kernel keeps the packet; the process gets its id only,
``NFQNL_COPY_META``, GSO packets whole); once the packet's delay has passed, a batch verdict accepts it
and every earlier one. The delay is the same for every packet, so the order is the queue's.
``--queue-bypass`` lets packets through unheld if the process is gone. The receiver holds them, not the
sender: a packet held on its way out still counts against its socket's TCP Small Queues budget (about a
millisecond of its rate), so a sender-side delay of 6.4 ms let a stream through at 0.8 MB/s; held on
arrival (the veth or loopback has let the sender's socket go of it), the same stream ran at 374 MB/s,
which its window over a 6.8 ms round trip allows.

Standard library only (it runs in each emulated host's network namespace, started by a launch's setup):

    python -m harness.base.delay_line start IFACE:DELAY_S [IFACE:DELAY_S ...]   # replaces an earlier one
    python -m harness.base.delay_line stop

One delay line per network namespace; its process id is kept in ``/run/rosetta-delay-line/<namespace>``.
A delay under :data:`MIN_DELAY_S` is not held; none left (or ``stop``) removes the line and its rules.
"""

from __future__ import annotations

import collections
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_GSO = 1 << 2
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
SOL_NETLINK, NETLINK_NO_ENOBUFS = 270, 5
QUEUE_MAXLEN = 65536  # packets held at once: a dilated link's bytes in flight, in 64 KB GSO packets, stay far below
# A delay shorter than this is not held: the line lets a packet go 0.3-0.5 ms late on this machine (its
# wake-ups and netlink's round trip, measured against a ping-pong), as much as such a delay itself; the real
# stack's own latency (tens of microseconds over a veth) stands for it.
MIN_DELAY_S = 1e-3
STOP_WAIT_S = 5.0  # the longest a stop waits for the old delay line to exit (s)
FIRST_QUEUE = 7100  # queue numbers this module takes, one per interface (away from 0, which others may use)
STATE = Path("/run/rosetta-delay-line")


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(msg: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, 0, 0) + body


def _bind(sock: socket.socket, queue: int) -> None:
    """Bind ``queue`` to this socket, ids only, GSO packets whole; raise OSError with the kernel's errno."""
    config = (_attr(NFQA_CFG_CMD, struct.pack("=BxH", NFQNL_CFG_CMD_BIND, 0))
              + _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))
              + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN))
              + _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO))
              + _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO)))
    sock.send(_message(NFQNL_MSG_CONFIG, queue, config, NLM_F_REQUEST | NLM_F_ACK))
    data = sock.recv(65536)
    _, kind, _, _, _ = struct.unpack_from("=IHHII", data)
    if kind == NLMSG_ERROR and (errno := -struct.unpack_from("=i", data, 16)[0]):
        raise OSError(errno, f"binding netfilter queue {queue}: {os.strerror(errno)}")


def _packets(data: bytes) -> list[tuple[int, int]]:
    """(queue, packet id) of each queued packet in one netlink datagram."""
    found, offset = [], 0
    while offset + 16 <= len(data):
        length, kind, _, _, _ = struct.unpack_from("=IHHII", data, offset)
        if length < 16:
            break
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            queue = socket.ntohs(struct.unpack_from("=H", data, offset + 18)[0])
            at = offset + 20
            while at + 4 <= offset + length:
                attr_len, attr_kind = struct.unpack_from("=HH", data, at)
                if attr_kind & 0x7FFF == NFQA_PACKET_HDR:
                    found.append((queue, struct.unpack_from("!I", data, at + 4)[0]))
                at += max(4, attr_len + (-attr_len % 4))
        offset += length + (-length % 4)
    return found


def serve(delays: dict[int, float], ready_fd: int | None = None) -> None:
    """Hold each packet of queue q for ``delays[q]`` seconds, then accept it (runs until killed). It wakes
    when a packet comes or is due, takes in every packet that has come and lets go of every one due."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    # a packet whose notice overflowed the buffer is still let go: a batch verdict accepts every earlier id
    sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
    sock.bind((0, 0))
    for queue in delays:
        _bind(sock, queue)
    if ready_fd is not None:
        os.write(ready_fd, b"ok")
        os.close(ready_fd)
    sock.setblocking(False)
    held = {queue: collections.deque() for queue in delays}  # (release time, packet id), oldest first
    while True:
        due = [line[0][0] for line in held.values() if line]
        select.select([sock], [], [], max(0.0, min(due) - time.monotonic()) if due else None)
        now = time.monotonic()
        while True:
            try:
                data = sock.recv(1 << 20)
            except BlockingIOError:
                break
            for queue, packet in _packets(data):
                held[queue].append((now + delays[queue], packet))
        for queue, line in held.items():
            last = None
            while line and line[0][0] <= now:
                last = line.popleft()[1]
            if last is not None:
                sock.send(_message(NFQNL_MSG_VERDICT_BATCH, queue,
                                   _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, last))))


def _state_file() -> Path:
    return STATE / str(os.stat("/proc/self/ns/net").st_ino)


def _rules(interfaces: list[str], action: str) -> list[list[str]]:
    return [["iptables", "-w", "-t", "mangle", action, "PREROUTING", "-i", iface, "-j", "NFQUEUE",
             "--queue-num", str(FIRST_QUEUE + i), "--queue-bypass"] for i, iface in enumerate(interfaces)]


def _ours(pid: str) -> bool:
    """Whether ``pid`` is this namespace's delay line (its record may outlive its namespace, whose number a
    new namespace reuses)."""
    try:
        return (os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino
                and b"delay_line" in Path(f"/proc/{pid}/cmdline").read_bytes())
    except (FileNotFoundError, ProcessLookupError):
        return False


def running() -> int | None:
    """The process id of this namespace's delay line, or None where none runs."""
    try:
        pid = _state_file().read_text().split()[0]
    except (FileNotFoundError, IndexError):
        return None
    return int(pid) if _ours(pid) else None


def stop() -> None:
    """Remove this namespace's delay line: its rules, then its process."""
    path = _state_file()
    if not path.exists():
        return
    pid, *interfaces = path.read_text().split()
    for rule in _rules(interfaces, "-D"):
        subprocess.run(rule, capture_output=True, check=False)
    if _ours(pid):
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
        # the kernel unbinds the queues only when the process has exited: a delay line started at once would
        # find them still bound (seen in CI: start replacing start failed to bind)
        deadline = time.monotonic() + STOP_WAIT_S
        while _ours(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
    path.unlink(missing_ok=True)


def start(links: dict[str, float]) -> None:
    """Replace this namespace's delay line by one holding the packets arriving through each interface for its
    delay (s)."""
    stop()
    links = {iface: delay for iface, delay in links.items() if delay >= MIN_DELAY_S}
    if not links:
        return
    if shutil.which("iptables") is None:
        raise SystemExit("delay line: iptables not found, which hands it the packets (Debian: apt-get install "
                         "iptables; tools/system-packages.txt)")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the delay line: its own session, no terminal, outliving this command
        os.close(read_fd)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            serve({FIRST_QUEUE + i: delay for i, delay in enumerate(links.values())}, write_fd)
        finally:
            os._exit(1)
    os.close(write_fd)
    ready = os.read(read_fd, 2)
    if ready != b"ok":
        raise SystemExit("delay line: could not bind its netfilter queues (needs root and nfnetlink_queue)")
    STATE.mkdir(parents=True, exist_ok=True)
    _state_file().write_text(" ".join([str(pid), *links]))
    for rule in _rules(list(links), "-A"):
        done = subprocess.run(rule, capture_output=True, text=True)
        if done.returncode != 0:
            stop()
            raise SystemExit(f"delay line: {' '.join(rule)}: {(done.stderr or done.stdout).strip()}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["stop"] and len(argv) == 1:
        return stop()
    if argv[:1] != ["start"]:
        raise SystemExit("usage: python -m harness.base.delay_line start IFACE:DELAY_S ... | stop")
    links = {}
    for item in argv[1:]:
        iface, _, delay = item.partition(":")
        try:
            links[iface] = float(delay)
        except ValueError:
            raise SystemExit(f"delay line: {item!r}: expected IFACE:DELAY_S (seconds)") from None
    start(links)


if __name__ == "__main__":
    main(sys.argv[1:])
