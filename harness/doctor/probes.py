"""The doctor's probes, run for real on the hosts: each GPU's step of the workload alone (a 1-rank run of the
scenario, emulated where it is), then, with the scenario's shaping applied to the hosts (its ``network`` cap,
or the emulated cluster's links and the fault planted on a card), the links through ``rosetta comm``'s worker
(gloo, CPU buffers, one rank a host): per host a broadcast from it (its card sending: bus bandwidth) and a
4-byte broadcast to it (its card receiving: latency), per pair of hosts a 2-rank allreduce, over all hosts a
ring, and the bisection's halves. Emulated figures are undilated: bandwidth x k, times / k."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from harness import launchers
from harness.base.errors import UserError
from harness.comm import runner as comm_runner
from harness.contract.axes import Backend, Collective
from harness.contract.events import read_rank
from harness.contract.spec import CommSpec, RunSpec
from harness.doctor.judge import Measurement, Probe
from harness.experiment import matrix, scenario as scenarios
from harness.launchers import hosts as host_list
from harness.machines import faults
from harness.results import provenance
from harness.running import runner

LATENCY_BYTES = 4
LATENCY_ITERS = 20  # a small message's time wanders through a loaded kernel: more of them, cheap
PORT = 29400  # the first launch's rendezvous port; each launch takes the next (no wait on a closing socket)


@dataclass(frozen=True)
class Cluster:
    """The hosts a check probes, how to reach them, and the scenario they come from (None: hosts given)."""

    hosts: tuple[str, ...]
    addresses: tuple[str, ...]
    remote: host_list.RemoteShell
    interface: str = "eth0"
    spec: RunSpec | None = None

    @property
    def dilation(self) -> float:
        """The emulated cluster's time dilation k (1 without one)."""
        return float((self.spec.emulation or {}).get("dilation") or 1.0) if self.spec else 1.0

    def machine_type(self) -> str:
        """What the hosts are, derived: the emulated cluster's GPUs and card, else this machine's CPU
        (network-namespace hosts are this machine), a SLURM job's partition (its nodes are alike where the
        partition's are), or "unnamed" (ssh hosts: give --machine-type)."""
        emulation = (self.spec.emulation or {}) if self.spec else {}
        if emulation:
            return (f"emulated {emulation.get('accelerator')} x{self.spec.procs_per_node} over "
                    f"{emulation.get('inter_link') or 'no link'}, {self.spec.workload.value} {self.spec.size.value}")
        if self.remote == host_list.RemoteShell.SRUN and os.environ.get("SLURM_JOB_PARTITION"):
            return f"slurm partition {os.environ['SLURM_JOB_PARTITION']}"
        return provenance.cpu_model() or "unnamed" if self.remote == host_list.RemoteShell.NETNS else "unnamed"


def from_scenario(path: Path) -> Cluster:
    """The hosts of a scenario file's largest run (its launcher options' hosts, addresses, remote, interface)."""
    return from_loaded(scenarios.load(path), path)


def from_loaded(scenario: scenarios.Scenario, path: Path | str) -> Cluster:
    """The hosts of a loaded scenario's largest run (``path``: where it came from, for the messages)."""
    specs = matrix.expand(scenario)
    spec = max(specs, key=lambda s: s.nodes)
    opts = launchers.options(spec)
    remote = getattr(opts, "remote", host_list.RemoteShell.SSH)
    if remote == host_list.RemoteShell.SRUN and not getattr(opts, "hosts", ()):  # the job's nodes
        return job_cluster(spec.nodes, getattr(opts, "interface", "eth0"), spec)
    hosts = tuple(getattr(opts, "hosts", ()))[: spec.nodes]
    if len(hosts) < 2:
        raise UserError(f"{path}: [launcher_options.{spec.launcher}] hosts names {len(hosts)} host(s) for its "
                        f"largest run; the doctor needs 2 or more")
    given = tuple(getattr(opts, "addresses", ()))[: spec.nodes]
    return Cluster(hosts, given or hosts, remote, getattr(opts, "interface", "eth0"), spec)


def job_cluster(count: int | None = None, interface: str = "eth0", spec: RunSpec | None = None) -> Cluster:
    """The nodes of the SLURM job this check runs in (the first ``count``; all for None), reached by srun
    steps, at the addresses SLURM knows them by."""
    names, addresses = host_list.job_nodes()
    return Cluster(names[:count], addresses[:count], host_list.RemoteShell.SRUN, interface, spec)


def check_reachable(cluster: Cluster) -> None:
    """A one-line error where a network-namespace host does not exist or the hosts are too few."""
    if len(cluster.hosts) < 2 or len(set(cluster.hosts)) != len(cluster.hosts):
        raise UserError(f"doctor: needs 2 or more distinct hosts, got {', '.join(cluster.hosts) or 'none'}")
    if len(cluster.addresses) != len(cluster.hosts):
        raise UserError(f"doctor: {len(cluster.addresses)} addresses for {len(cluster.hosts)} hosts")
    if cluster.remote == host_list.RemoteShell.NETNS:
        absent = [h for h in cluster.hosts if not (host_list.NETNS_DIR / h).exists()]
        if absent:
            raise UserError(f"doctor: no network namespace {', '.join(absent)} "
                            f"(start them: tools/netns_hosts.sh start {len(cluster.hosts)})")


def shape(cluster: Cluster) -> int:
    """Apply the scenario's shaping to the hosts (as its runs' launchers do before their ranks start): the
    commands' count; none without a scenario or off network-namespace hosts."""
    if cluster.spec is None:
        return 0
    commands = host_list.shaping(cluster.spec, cluster.hosts, cluster.remote, cluster.interface)
    for argv in commands:
        done = subprocess.run(list(argv), capture_output=True, text=True, cwd=provenance.REPO_ROOT)
        if done.returncode != 0:
            raise UserError(f"doctor: shaping failed: {' '.join(argv)}: {(done.stderr or done.stdout).strip()[-200:]}")
    return len(commands)


@dataclass
class Session:
    """One check's launches: where their folders go, and the failures met (each a finding)."""

    cluster: Cluster
    out_dir: Path
    check_id: str
    big_bytes: int = 4 << 20
    iters: int = 3
    timeout_s: float = 300.0
    launches: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def comm(self, order: tuple[str, ...], collectives: tuple[Collective, ...], sender: str | None = None
             ) -> tuple[dict, tuple[str, ...]]:
        """One launch over ``order`` (one rank a host), a broadcast sent from ``sender``'s rank: {(collective,
        bytes): row} and each rank's host, as the ranks said (torchrun's rendezvous numbers the hosts in the
        order of their addresses, not of ``order``: :func:`rank_order` predicts it)."""
        where = dict(zip(self.cluster.hosts, self.cluster.addresses))
        options = {"hosts": list(order), "addresses": [where[h] for h in order], "remote": self.cluster.remote.value,
                   "interface": self.cluster.interface, "rendezvous_port": PORT + self.launches}
        root = rank_order(order, where).index(sender) if sender else 0
        spec = CommSpec(backend=Backend.GLOO, device="cpu", nodes=len(order), procs_per_node=1,
                        collectives=collectives, sizes=(LATENCY_BYTES, self.big_bytes),
                        iters=(LATENCY_ITERS, self.iters), warmup_iters=1, timeout_s=self.timeout_s,
                        launcher="torchrun", launcher_options=options, root=root)
        reason = launchers.unsupported_reason("torchrun", spec)  # type: ignore[arg-type]
        if reason:
            raise UserError(f"doctor: cannot launch over {', '.join(order)}: {reason}")
        run_dir = self.out_dir / f"{self.next_launch():03d}-{'+'.join(order)}"
        rows = comm_runner.run_launch(spec, run_dir, self.check_id, keep_shaping=True)
        if any(r["status"] != "ok" for r in rows):
            self.failures.append(f"{'+'.join(order)}: {rows[0]['status']}: {rows[0].get('reason')}")
            return {}, ()
        ranks = tuple((read_rank(run_dir, r).hello or {}).get("host") for r in range(len(order)))
        return {(r["collective"], int(r["bytes"])): r for r in rows}, ranks

    def next_launch(self) -> int:
        """The next launch's number (its folder's prefix; a comm launch's rendezvous port is PORT + it)."""
        with self.lock:
            self.launches += 1
            return self.launches

    def bandwidth(self, row: Mapping[str, Any]) -> float:
        return float(row["busbw_GBps"]) * self.cluster.dilation

    def latency_us(self, row: Mapping[str, Any]) -> float:
        return float(row["time_p50_s"]) / self.cluster.dilation * 1e6


def link_probes(session: Session) -> list[Measurement]:
    """Per host its card both ways (each host to the next: a broadcast from it, the next's arrival), per pair
    a 2-rank allreduce (the neighbours' from those launches), over 3 hosts or more a ring."""
    hosts, found, pairs = session.cluster.hosts, [], set()
    for i, host in enumerate(hosts):
        found += card(session, host, hosts[(i + 1) % len(hosts)], pairs)
    for a, b in itertools.combinations(hosts, 2):
        if frozenset((a, b)) not in pairs:
            found += pair(session, (a, b), pairs)
    if len(hosts) >= 3:
        found += ring(session)
    return found


def card(session: Session, host: str, peer: str, pairs: set | None = None) -> list[Measurement]:
    """``host``'s card sending (a broadcast from it to ``peer``: bus bandwidth) and ``peer``'s receiving (a
    4-byte broadcast's latency), with the pair's allreduce in the same launch where ``pairs`` lacks it."""
    hosts, big = session.cluster.hosts, session.big_bytes
    wanted = (Collective.BROADCAST,) + (() if pairs is None or frozenset((host, peer)) in pairs else (Collective.ALLREDUCE,))
    rows, ranks = session.comm((host, peer), wanted, sender=host)
    if not rows:
        return []
    root = rank_order((host, peer), dict(zip(hosts, session.cluster.addresses))).index(host)
    sender, receiver = ranks[root], ranks[1 - root]  # as the ranks said where they ran
    found = [Measurement(Probe.EGRESS, sender, session.bandwidth(rows["broadcast", big]), f"broadcast {big} B to {receiver}"),
             Measurement(Probe.ARRIVAL, receiver, session.latency_us(rows["broadcast", LATENCY_BYTES]),
                         f"broadcast {LATENCY_BYTES} B from {sender}")]
    return found + (_pair(session, (host, peer), rows, pairs) if pairs is not None else [])


def pair(session: Session, hosts: tuple[str, str], pairs: set | None = None) -> list[Measurement]:
    """A 2-rank allreduce between two hosts: its bus bandwidth and its 4-byte latency."""
    rows, _ = session.comm(hosts, (Collective.ALLREDUCE,))
    return _pair(session, hosts, rows, set() if pairs is None else pairs)


def ring(session: Session) -> list[Measurement]:
    """The ring allreduce over every host (none where it failed)."""
    hosts = session.cluster.hosts
    figure = ring_busbw(session, hosts)
    return [] if figure is None else [Measurement(Probe.RING, "+".join(hosts), figure,
                                                  f"allreduce {session.big_bytes} B over {len(hosts)} ranks")]


def remeasure(session: Session, m: Measurement) -> list[Measurement]:
    """A new sample of ``m``'s probe on its subject (a suspect's repeat: :func:`harness.doctor.judge.confirm`):
    the GPU's step alone, the card's broadcast from it (or, receiving, from the host before it), the pair's
    allreduce, the ring."""
    hosts = session.cluster.hosts
    if m.probe == Probe.COMPUTE:
        host, gpu = m.subject.rsplit("/gpu", 1)
        return gpu_probe(session, hosts.index(host), int(gpu), session.next_launch())
    if m.probe == Probe.EGRESS:
        i = hosts.index(m.subject)
        return card(session, m.subject, hosts[(i + 1) % len(hosts)])
    if m.probe == Probe.ARRIVAL:
        i = hosts.index(m.subject)
        return card(session, hosts[i - 1], m.subject)
    if m.probe in (Probe.PAIR, Probe.PAIR_LATENCY):
        return pair(session, tuple(m.subject.split("+")))  # type: ignore[arg-type]
    return ring(session)


def rank_order(order: tuple[str, ...], addresses: Mapping[str, str]) -> tuple[str, ...]:
    """The hosts in the order torchrun's c10d rendezvous gives them ranks: by their addresses (as strings)."""
    return tuple(sorted(order, key=lambda h: addresses[h]))


def _pair(session: Session, pair: tuple[str, str], rows: Mapping, seen: set) -> list[Measurement]:
    if not rows or frozenset(pair) in seen:
        return []
    seen.add(frozenset(pair))
    subject, big = "+".join(sorted(pair)), session.big_bytes
    return [Measurement(Probe.PAIR, subject, session.bandwidth(rows["allreduce", big]), f"allreduce {big} B, 2 ranks"),
            Measurement(Probe.PAIR_LATENCY, subject, session.latency_us(rows["allreduce", LATENCY_BYTES]),
                        f"allreduce {LATENCY_BYTES} B, 2 ranks")]


def ring_busbw(session: Session, group: tuple[str, ...]) -> float | None:
    """The ring allreduce's bus bandwidth (GB/s, undilated) over ``group``, one rank a host (None: failed)."""
    rows, _ = session.comm(group, (Collective.ALLREDUCE,))
    return session.bandwidth(rows["allreduce", session.big_bytes]) if rows else None


def ring_measure(session: Session) -> Callable[[tuple[str, ...]], float]:
    """What the bisection measures a half with (a failed half is as slow as can be: 0 GB/s)."""
    return lambda group: ring_busbw(session, group) or 0.0


def one_gpu(emulation: Mapping[str, Any], host: int, gpu: int, procs_per_node: int) -> dict[str, Any]:
    """The emulation of GPU ``gpu`` of host ``host`` run alone: a fault on it (or on its host, for the host's
    kinds) kept as the lone rank's, a network card's dropped (a 1-rank run has no link)."""
    out = dict(emulation)
    fault = out.pop("fault", None)
    if fault and faults.FaultKind(fault["kind"]) not in faults.LINK_KINDS:
        mine = (fault["rank"] == host * procs_per_node + gpu if fault["rank"] is not None else fault["host"] == host)
        if mine:
            out["fault"] = {**fault, "rank": 0 if fault["rank"] is not None else None, "host": 0, "procs_per_node": 1}
    return out


def compute_probes(session: Session) -> list[Measurement]:
    """Each GPU's step alone (a 1-rank run of the scenario's largest run on its host): the median step (s).
    The hosts probe at once, one GPU of each at a time (a GPU is alone on its host, as on a real cluster where
    each host is its own machine): a check's compute probes take a host's GPUs' time, not the cluster's."""
    spec = session.cluster.spec
    if spec is None:
        return []
    found: list[Measurement] = []
    hosts = range(len(session.cluster.hosts))
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        for gpu in range(spec.procs_per_node):
            wave = [pool.submit(gpu_probe, session, index, gpu, session.next_launch()) for index in hosts]
            for future in wave:
                found += future.result()
    return found


def gpu_probe(session: Session, index: int, gpu: int, launch: int) -> list[Measurement]:
    """GPU ``gpu`` of host ``index`` alone: a 1-rank run of the scenario there (launch number ``launch``)."""
    cluster, spec = session.cluster, session.cluster.spec
    host, address = cluster.hosts[index], cluster.addresses[index]
    options = {**spec.launcher_options, "hosts": [host], "addresses": [address]}
    if spec.launcher == "torchrun":  # the hosts probe at once: each launch its own port (hosts may share a namespace)
        options["rendezvous_port"] = PORT + launch
    alone = dataclasses.replace(spec, nodes=1, procs_per_node=1, launcher_options=options,
                                emulation=one_gpu(spec.emulation, index, gpu, spec.procs_per_node))
    row = runner.run_one(alone, session.out_dir / f"{launch:03d}-{host}-gpu{gpu}", session.check_id)
    if row["status"] != "ok" or row.get("step_time_p50_s") is None:
        session.failures.append(f"{host}/gpu{gpu}: {row['status']}: {row.get('reason')}")
        return []
    return [Measurement(Probe.COMPUTE, f"{host}/gpu{gpu}", float(row["step_time_p50_s"]),
                        f"{spec.workload.value} {spec.size.value}, batch {spec.batch_per_worker}, "
                        f"1 rank, median of {spec.measured_steps} steps")]
