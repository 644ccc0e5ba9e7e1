"""Each host's link timed by its own ranks, after the measured window: the figure that tells a slow network card or
a long link apart, which no rank's step can (a synchronous exchange runs at its slowest link, so every rank's
exchange grows alike and no rank is late for it).

Hosts meet in rounds (a round-robin tournament: every pair of hosts once, each host in at most one pair a
round, a barrier of every rank between rounds so that no two pairs share a card at once). In a pair the two
hosts' first ranks (local rank 0: ranks are numbered host by host) send each other ``nbytes`` at once and wait for
the other's, :data:`REPEATS` times; the pair's figure is the median exchange (seconds, as measured: an emulated
cluster's dilated). A host whose card sends at half rate, or whose arriving packets wait longer, is slow in
every pair it is in; any other host in one pair of its H - 1 (harness/results/attribution.py takes each host's
median pair). Emitted as a ``link_probe`` record by the hosts' first ranks: ``host`` (its index) and
``pairs`` [{peer, seconds, bytes}].

Framework-free: the framework hands :func:`probe` its own exchange with one peer and its barrier.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from harness.contract.events import EventWriter

RECORD = "link_probe"
REPEATS = 4  # exchanges a pair; their median is the pair's figure (one late wake-up of this CPU is not a link)
NBYTES = 2 * 1024 * 1024  # each way: at 10GbE / 16 (a dilated emulated card) ~27 ms, well above a wake-up's jitter


def rounds(hosts: int) -> list[list[tuple[int, int]]]:
    """Every pair of ``hosts`` once, in rounds of disjoint pairs (the circle method: H - 1 rounds for an even H,
    H for an odd one, each host sitting one out)."""
    seats = list(range(hosts)) + ([-1] if hosts % 2 else [])  # -1: the bye
    n, out = len(seats), []
    for _ in range(n - 1):
        out.append([(min(a, b), max(a, b)) for a, b in zip(seats[:n // 2], reversed(seats[n // 2:]))
                    if a >= 0 and b >= 0])
        seats = [seats[0], seats[-1], *seats[1:-1]]
    return out


def probe(events: EventWriter, rank: int, world: int, nodes: int, exchange: Callable[[int, int], None],
          barrier: Callable[[], None], nbytes: int = NBYTES) -> None:
    """Time every pair of hosts' link (needs 2 hosts or more; a no-op otherwise). ``exchange(peer, nbytes)``
    sends ``nbytes`` to rank ``peer`` and receives as many from it, returning once both are done."""
    if nodes < 2 or world % nodes:
        return
    per_host = world // nodes
    host, first = divmod(rank, per_host)
    pairs = []
    for pairing in rounds(nodes):
        barrier()
        peer = next((b if a == host else a for a, b in pairing if host in (a, b)), None)
        if first == 0 and peer is not None:
            pairs.append({"peer": peer, "seconds": _timed(lambda: exchange(peer * per_host, nbytes)),
                          "bytes": nbytes})
    barrier()
    if pairs:
        events.emit(RECORD, host=host, pairs=pairs)


def _timed(exchange: Callable[[], None]) -> float:
    """The median of :data:`REPEATS` exchanges (s), after one untimed (the connection's first use warms it)."""
    exchange()
    laps = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        exchange()
        laps.append(time.perf_counter() - start)
    return statistics.median(laps)
