"""A link's latency on network-namespace hosts: the user-space delay line (harness/base/delay_line.py)
holds each packet arriving through an interface for its delay, then lets it through, in order."""

import json
import shutil
import statistics
import subprocess
import sys

import pytest

ECHO = """
import socket, sys
server = socket.create_server((sys.argv[1], 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while data := conn.recv(65536):
    conn.sendall(data)
"""

PING = """
import socket, sys, threading, time, json
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for _ in range(25):
    t0 = time.perf_counter()
    conn.sendall(b"x")
    conn.recv(1)
    rtts.append(time.perf_counter() - t0)
big = bytes(range(256)) * 16_000  # 4 MB there and back: every packet of a stream passes, none lost or reordered
threading.Thread(target=conn.sendall, args=(big,), daemon=True).start()  # read as it comes back
got = bytearray()
while len(got) < len(big):
    got += conn.recv(1 << 20)
print(json.dumps({"rtts": rtts, "intact": bytes(got) == big}))
"""


def _in(host: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", host, *argv]


def _round_trips(hosts: dict[str, str]) -> tuple[float, bool]:
    """Median round trip (s) of one byte from h0 to an echo server on h1, and whether a 4 MB echo came back whole."""
    (h0, _), (h1, a1) = list(hosts.items())[:2]
    server = subprocess.Popen(_in(h1, sys.executable, "-c", ECHO, a1), stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        out = subprocess.run(_in(h0, sys.executable, "-c", PING, a1, port), capture_output=True, text=True,
                             timeout=60, check=True).stdout
    finally:
        server.kill()
        server.wait()
    result = json.loads(out)
    return statistics.median(result["rtts"][3:]), result["intact"]


def test_each_packet_arriving_at_a_host_waits_the_delay_then_the_line_is_removed(two_hosts):
    if shutil.which("iptables") is None:
        pytest.skip("the delay line needs iptables (tools/system-packages.txt)")
    h0 = next(iter(two_hosts))
    line = [sys.executable, "-m", "harness.base.delay_line"]
    before, _ = _round_trips(two_hosts)
    subprocess.run(_in(h0, *line, "start", "eth0:0.030"), check=True, timeout=30)
    try:
        # the host's ranks count it as the run's own CPU (harness.contract.telemetry), found in its namespace only
        ask = "from harness.base import delay_line; print(delay_line.running())"
        found = subprocess.run(_in(h0, sys.executable, "-c", ask), capture_output=True, text=True).stdout.strip()
        other = subprocess.run(_in(list(two_hosts)[1], sys.executable, "-c", ask), capture_output=True, text=True)
        assert found.isdigit() and other.stdout.strip() == "None"
        held, intact = _round_trips(two_hosts)
        # one way held (the echo arriving at h0; h1 takes the byte in at once): the round trip grows by the delay
        assert 0.030 <= held - before < 0.050 and intact
        subprocess.run(_in(h0, *line, "start", "eth0:0.010"), check=True, timeout=30)  # replaces the first
        assert 0.010 <= _round_trips(two_hosts)[0] - before < 0.020
    finally:
        subprocess.run(_in(h0, *line, "stop"), check=True, timeout=30)
    assert _round_trips(two_hosts)[0] < before + 0.010
    rules = subprocess.run(_in(h0, "iptables", "-t", "mangle", "-S", "PREROUTING"), capture_output=True,
                           text=True, check=True).stdout
    assert "NFQUEUE" not in rules and "-P PREROUTING ACCEPT" in rules  # the chain the line's rule was in


def test_a_bad_link_argument_is_one_line():
    done = subprocess.run([sys.executable, "-m", "harness.base.delay_line", "start", "eth0:soon"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and done.stderr.strip() == "delay line: 'eth0:soon': expected IFACE:DELAY_S (seconds)"
