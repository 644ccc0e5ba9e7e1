"""An emulated GPU cluster on one machine: emulated accelerators whose real gradients cross time-dilated
links (device ``emulated``, ``exchange = "gradients"`` in ``[emulation]``; no deep-learning import here).

The hosts are network namespaces (harness.launchers.hosts, ``remote = "netns"``), the GPUs of a host its
ranks. Two links are capped with Linux's ``tbf`` (their rate: :func:`tbf_argv`), both named in
``interconnects.toml`` beside this module: ``inter_link``, each host's network card (``eth0``: every byte
a host sends to another crosses it, as on a cluster where a node's GPUs share its NICs), and ``intra_link``,
the link between GPUs of one host (``lo``: ranks of one namespace talk over loopback TCP, gloo's and Open
MPI's ``tcp`` transport alike, so shaping it stands in for PCIe or NVLink; one queue carries all of the
host's GPUs' traffic, so it is given their summed rate). Each packet arriving through either interface also
waits its link's latency, in a user-space delay line (harness/base/delay_line.py); both are dilated by k.

Time dilation: with a factor k every compute sleep lasts k times the profiled time and every link carries
1/k of its rate, so that the real CPU work of this machine (copying and reducing
gradients, the kernel's TCP) stays small beside the dilated step; the harness divides measured times by k
(harness/running/collect.py). ``dilation = 0`` picks k with :func:`auto_dilation`. The emulation checks
itself afterwards: where this machine's CPU was busy for most of the window (:data:`SATURATED_CPU`), what
limited the step was the emulator, and the row says ``emulation_saturated``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from harness.base import network
from harness.base.errors import UserError
from harness.contract.axes import Exchange, StepVariation
from harness.machines import faults
from harness.machines.interconnects import INTERCONNECTS_FILE, load_presets

# CPU seconds spent per byte of gradient one rank exchanges in a ring allreduce over local TCP (the kernel's
# send and receive copies, gloo's or MPI's reduction), and per byte a rank makes each step (filling the
# gradient, autograd's accumulation, DDP's bucket copy): estimates (about 0.9 and 4 GB/s per core), not
# measured apart. They only size auto's k; a run checks the result afterwards (host_cpu_busy,
# emulation_saturated): batchai-torch-v100's 16 DDP ranks kept this 2-core machine's CPUs 28% busy at
# k = 32 and 20% at the k they gave (64) (benchmarks/RESULTS.md).
CPU_S_PER_EXCHANGED_BYTE = 1 / 0.9e9
CPU_S_PER_MADE_BYTE = 1 / 4e9
DILATION_MARGIN = 20  # auto: the estimated CPU work at most a twentieth of the dilated step
MAX_DILATION = 2000.0
# auto's least k: the per-layer sleeps' overshoot and the gradients' making are this machine's undilated
# costs. Measured (benchmarks/RESULTS.md): a 1-GPU ResNet-50 step at k = 2 read 3.2% (A100 profile) and
# 5.2% (V100) slow; at k = 16, 0.7% (V100: 328.7 images/s against 331).
MIN_DILATION = 16.0
SATURATED_CPU = 0.75  # the machine's busy fraction over the window beyond which the emulator, not the
#                       emulated cluster, limited the step (the dilated step is mostly sleeps when valid)


@dataclass(frozen=True)
class Link:
    """One named link of interconnects.toml: effective bandwidth each direction (bytes/s) and latency (s)."""

    name: str
    bandwidth_Bps: float
    latency_s: float


def link(name: str, path: Path = INTERCONNECTS_FILE) -> Link:
    """The ``[link.NAME]`` preset, or a bare rate in the ``network`` axis's notation (e.g. ``2gbit``: that
    rate, no latency); a one-line error naming the known ones."""
    if network.RATE.match(name):
        return Link(name, network.bits_per_s(name) / 8, 0.0)
    links = load_presets(path).links
    if name not in links:
        raise UserError(f"emulation: unknown link {name!r}; known: {', '.join(links)} ({path.name}), "
                        f"or a rate like '2gbit'")
    return Link(name, links[name].bandwidth_Bps, links[name].latency_s)


def ring_allreduce_s(link_: Link, ranks: int, nbytes: float) -> float:
    """A ring allreduce's time over ``link_`` (each rank sends 2(n-1)/n of the bytes, 2(n-1) steps)."""
    if ranks < 2:
        return 0.0
    return 2 * (ranks - 1) * link_.latency_s + 2 * (ranks - 1) / ranks * nbytes / link_.bandwidth_Bps


def ring_gather_s(link_: Link, ranks: int, nbytes: float) -> float:
    """A ring all-gather's (or reduce-scatter's) time over ``link_`` of ``nbytes`` gathered (or reduced) in all:
    each rank sends (n-1)/n of them, n-1 steps; half a ring allreduce."""
    if ranks < 2:
        return 0.0
    return (ranks - 1) * link_.latency_s + (ranks - 1) / ranks * nbytes / link_.bandwidth_Bps


def in_host_floor_s(intra: Link | None, gpus: int, nbytes: float) -> float:
    """A ring allreduce through ``gpus`` GPUs can go no faster than its in-host hops over ``intra`` (s,
    undilated): what a process standing for its host's GPUs (``gpus_per_rank``) times rather than runs; no
    link: 0."""
    return ring_allreduce_s(intra, gpus, nbytes) if intra is not None else 0.0


def ring_share(processes: int, gpus: int) -> float:
    """The bytes each hop of a ring among ``processes`` carries over those of a ring through all ``gpus``
    ((P-1)/P over (W-1)/W): a reduced cluster's links run at this fraction of their rate, so that its
    processes' real ring takes the bandwidth time of the ring through every GPU (1: no reduction)."""
    if processes < 2 or gpus <= processes:
        return 1.0
    return ((processes - 1) / processes) / ((gpus - 1) / gpus)


def missing_ring_steps(processes: int, gpus: int) -> int:
    """The latency steps a ring through ``gpus`` GPUs has beyond a ring among ``processes``: 2(W-1) - 2(P-1),
    which a reduced cluster's in-host reduction adds, each at its ring's slowest hop's latency."""
    return 2 * (gpus - max(processes, 1)) if gpus > processes else 0


def undilated_exchange_s(intra: Link | None, inter: Link | None, nodes: int, procs_per_node: int,
                         gradient_bytes: float) -> float:
    """The slowest link's share of one step's ring allreduce, undilated (s): what k must stretch."""
    world = nodes * procs_per_node
    times = []
    if inter is not None and nodes > 1:
        times.append(ring_allreduce_s(inter, world, gradient_bytes))
    if intra is not None and procs_per_node > 1:
        times.append(ring_allreduce_s(intra, world if nodes == 1 else procs_per_node, gradient_bytes))
    return max(times, default=0.0)


def auto_dilation(world: int, gradient_bytes: float, exchange_s: float, compute_s: float, cores: int,
                  exchange_cpu_cost: float = 1.0) -> float:
    """k such that this machine's CPU work of one step (every rank's gradients made and exchanged, spread
    over the cores the ranks can use) is at most 1/DILATION_MARGIN of the dilated exchange (or of the
    dilated compute, where the exchange is shorter), rounded up to a power of two, from MIN_DILATION to
    MAX_DILATION. ``exchange_cpu_cost``: the framework's CPU work a byte exchanged, relative to gloo's
    (FrameworkInfo.emulated_exchange_cpu_cost)."""
    per_byte = CPU_S_PER_MADE_BYTE + (CPU_S_PER_EXCHANGED_BYTE * exchange_cpu_cost if world > 1 else 0.0)
    cpu_s = world * gradient_bytes * per_byte / max(1, min(cores, world))
    window = max(exchange_s, compute_s, 1e-9)
    wanted = DILATION_MARGIN * cpu_s / window
    return float(min(MAX_DILATION, max(MIN_DILATION, 2 ** math.ceil(math.log2(max(1.0, wanted))))))


# How long a packet may wait in a shaped link's queue: long, so that the ranks' flows bursting together
# into a dilated link queue rather than drop (a drop costs TCP a retransmission timeout of 200 ms or more,
# undilated). With 200 ms, one step of 16 Horovod ranks took 57 s against 17 s for the others (drops or
# this machine's CPU: not told apart)
QUEUE = "5s"


LARGEST_PACKET = 65536 + 1024  # loopback's 64 KiB packets (a TSO packet's too) and their headers (bytes)


def tbf_argv(interface: str, link_: Link, dilation: float, share: int = 1, scale: float = 1.0) -> tuple[str, ...]:
    """``tc`` capping ``interface`` at ``share`` x the link's rate / k (a token bucket: ``tbf``). The rate
    only: the latency is the delay line's (:func:`delay_line_argv`). ``scale``: a reduced cluster's, whose
    bytes are 1/scale of the full size's (the rate is divided by it too, within ``dilation``): its burst, the
    bytes an idle bucket lets through at once, is the full size's / scale where a packet still fits (a full
    burst would let a larger share of each step's bytes through free: 256 KiB of 0.35 MB a hop)."""
    rate_bits = max(8e3, link_.bandwidth_Bps * 8 * share / dilation)
    # above loopback's 64 KiB packets; the timer's 4 ms (of the full size's rate)
    burst = max(LARGEST_PACKET, int(max(256 * 1024, rate_bits * scale / 8 / 250) / scale))
    return ("tc", "qdisc", "replace", "dev", interface, "root", "tbf", "rate", f"{int(rate_bits)}bit",
            "burst", str(burst), "latency", QUEUE)


def delay_line_argv(python: str, delays: Mapping[str, float]) -> tuple[str, ...]:
    """The command that holds each packet arriving through each interface for its delay (s): the links'
    latencies x k (harness/base/delay_line.py: a user-space delay line, since ``netem``, which would, is not
    in every kernel, this machine's included); no delays: the host's earlier delay line removed."""
    return (python, "-m", "harness.base.delay_line", "start", *(f"{i}:{d:.9f}" for i, d in delays.items()))


# A dilated link's senders would cut its bytes into k times smaller packets: TCP sizes a TSO packet to about
# 1 ms of its pacing rate, and BBR (this machine's default) paces at the dilated rate. At k = 64, 8 Horovod
# ranks on 2 hosts sent 711,876 packets in 5 steps, twice k = 32's, each through the delay line and the CPU.
# An emulated host runs a loss-based TCP that does not pace (CUBIC, Linux's default and the 2018 clusters',
# where the machine allows it in a namespace; Reno otherwise) and sends the packets of the undilated link:
# 1 ms of its rate, at most one 64 KiB TSO packet (the same 5 steps through Reno and 45 segments: 93,454).
TSO_BYTES, MSS_BYTES = 65536, 1448
TCP_SETTINGS = "/proc/sys/net/ipv4/"  # the host's own: a network namespace has its own TCP settings


def tcp_argv(link_: Link | None) -> tuple[str, ...]:
    """The command (run inside a host) that sets its TCP: CUBIC where allowed, else Reno, and the smallest
    TSO packet, in segments, that ``link_`` undilated would send (the kernel's 2 without a link)."""
    segments = min(255, math.ceil(min(TSO_BYTES, link_.bandwidth_Bps * 1e-3) / MSS_BYTES)) if link_ else 2
    at = TCP_SETTINGS
    return ("sh", "-c", f"cc=reno; grep -qw cubic {at}tcp_allowed_congestion_control && cc=cubic; "
                        f"echo $cc > {at}tcp_congestion_control && echo {segments} > {at}tcp_min_tso_segs")


def shaping(emulation: Mapping[str, Any], prefix: tuple[str, ...], interface: str, procs_per_node: int,
            nodes: int, python: str, host: int = 0) -> tuple[tuple[str, ...], ...]:
    """The commands that shape one emulated host (index ``host``, run inside it through ``prefix``): each of
    its two interfaces to its link's rate, or unshaped where the run names none (a namespace keeps an earlier
    run's), and the links' latencies (its delay line, with ``python``); a fault planted on its network card
    changes its inter link (harness.machines.faults.link)."""
    k = float(emulation["dilation"])
    # gradients 1/s of their size: the links' rates 1/s; processes standing for G GPUs each: their ring's
    # hops carry less than the ring through every GPU would, so the links are slower by as much
    processes = nodes * procs_per_node
    slower = int(emulation.get("gradient_scale", 1)) / ring_share(processes, processes * int(emulation.get(
        "gpus_per_rank", 1)))
    inter, intra = emulation.get("inter_link"), emulation.get("intra_link")
    links = {interface: faults.link(emulation, host, link(inter)) if inter and nodes > 1 else None,
             "lo": link(intra) if intra and procs_per_node > 1 else None}
    shares = {interface: 1, "lo": procs_per_node}
    rates = tuple((*prefix, *(tbf_argv(iface, link_, k * slower, share=shares[iface], scale=slower) if link_
                              else network.shaping_argv(iface, network.UNLIMITED))) for iface, link_ in links.items())
    delays = {iface: link_.latency_s * k for iface, link_ in links.items() if link_ and link_.latency_s > 0}
    return (*rates, (*prefix, *delay_line_argv(python, delays)), (*prefix, *tcp_argv(links[interface])))


def shapes_links(emulation: Mapping[str, Any]) -> bool:
    return bool(emulation.get("inter_link") or emulation.get("intra_link"))
