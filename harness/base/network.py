"""The ``network`` axis: a cap on each host's link bandwidth, applied with Linux's ``tbf`` qdisc; and
:func:`free_port`, a port for a server the harness starts on this machine.

Values are ``unlimited`` or a rate in tc's notation: a number and ``kbit``, ``mbit`` or
``gbit`` (bits per second, decimal multiples), e.g. ``10gbit``, ``1gbit``, ``100mbit``.
Caps are applied only to hosts the harness owns (network namespaces, see
``tools/netns_hosts.py``): shaping a real cluster's links is not a benchmark's business.
"""

from __future__ import annotations

import re
import socket

UNLIMITED = "unlimited"
# ASCII digits only (Python's \d takes any script's, which tc does not read), a dozen at most
RATE = re.compile(r"\A(?P<number>[0-9]{1,12}(?:\.[0-9]{1,6})?)(?P<unit>kbit|mbit|gbit)\Z")
UNIT_BITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
LEAST_BITS, MOST_BITS = 8e3, 1.6e12  # 8 kbit/s (tbf's least useful rate) to 1.6 Tbit/s (the fastest NIC: 1600 GbE)
TBF_LATENCY = "50ms"  # how long a packet may wait in the shaper before it is dropped


def bits_per_s(value: str) -> float | None:
    """The cap in bits/s (None for unlimited); ValueError naming the allowed forms."""
    if value == UNLIMITED:
        return None
    match = RATE.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"must be {UNLIMITED!r} or a rate like '10gbit', '1gbit', '100mbit'; got {value[:40]!r}")
    rate = float(match["number"]) * UNIT_BITS[match["unit"]]
    if not LEAST_BITS <= rate <= MOST_BITS:
        raise ValueError(f"must be a rate from 8kbit to 1600gbit (a link's), got {value!r}")
    return rate


def tbf_burst_bytes(rate_bits_per_s: float) -> int:
    """A token bucket large enough for the rate at the kernel's timer granularity (rate/250 Hz),
    and never below 64 KiB so that segmentation-offloaded packets pass."""
    return max(64 * 1024, int(rate_bits_per_s / 8 / 250))


def shaping_argv(interface: str, value: str) -> tuple[str, ...]:
    """The ``tc`` command that caps ``interface`` at ``value`` (or lifts any cap)."""
    rate = bits_per_s(value)
    if rate is None:
        return ("tc", "qdisc", "replace", "dev", interface, "root", "pfifo", "limit", "1000")
    return ("tc", "qdisc", "replace", "dev", interface, "root", "tbf", "rate", value,
            "burst", str(tbf_burst_bytes(rate)), "latency", TBF_LATENCY)


def free_port() -> int:
    """A TCP port no one listens on now on 127.0.0.1 (the kernel's pick), for a server about to start here.

    Fixed ports collide when two runs or two test processes share a machine; a port picked this way can
    only be taken in the moment before its server binds it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
