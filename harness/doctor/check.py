"""One cluster check (``rosetta doctor``): the probes in order (compute first: its 1-rank runs leave a host's
card unshaped; then the shaping; then the links), the bisection over 4 hosts or more, every measurement
judged and stored, and what it found with its evidence. Exit status as compare's: 0 healthy, 1 a bad host,
link or GPU (or a probe that failed), 2 bad input (a UserError)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from harness.doctor import judge, probes, store
from harness.doctor.judge import Bisection, Probe, Reference, Verdict

HEALTHY, FOUND = 0, 1


@dataclass(frozen=True)
class Report:
    check_id: str
    machine_type: str
    hosts: tuple[str, ...]
    dilation: float
    verdicts: tuple[Verdict, ...]
    bisection: Bisection | None
    failures: tuple[str, ...] = ()
    shaped: int = 0  # shaping commands applied before the link probes
    notes: tuple[str, ...] = field(default=())

    @property
    def findings(self) -> list[Verdict]:
        return judge.findings(self.verdicts)

    @property
    def exit_status(self) -> int:
        return FOUND if self.findings or self.failures else HEALTHY

    def references(self) -> str:
        """Which reference the verdicts used, in words (the store's baseline, this check's median)."""
        used = sorted({v.reference.value for v in self.verdicts if v.reference != Reference.NONE})
        return ", ".join(used) or "none"


def new_check_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("doctor-%Y%m%dT%H%M%S%fZ")


def run_check(cluster: probes.Cluster, results_dir: Path, compute: bool = True, machine_type: str | None = None,
              big_bytes: int = 4 << 20, iters: int = 3) -> Report:
    """Probe ``cluster``, judge against the store's baseline for its machine type, append the verdicts."""
    probes.check_reachable(cluster)
    check_id, kind = new_check_id(), machine_type or cluster.machine_type()
    results_dir = Path(results_dir).absolute()  # the ranks start in the repository, not here
    session = probes.Session(cluster, results_dir / "runs" / check_id, check_id, big_bytes=big_bytes, iters=iters)
    notes = []
    found = probes.compute_probes(session) if compute else []
    if compute and cluster.spec is None:
        notes.append("no compute probe: hosts given without a scenario (no workload to step)")
    shaped = probes.shape(cluster)
    found += probes.link_probes(session)
    bisection = None
    if len(cluster.hosts) >= 4:
        bisection = judge.bisect(cluster.hosts, probes.ring_measure(session))
    else:
        notes.append(f"no bisection: {len(cluster.hosts)} hosts (halves need 2 hosts each)")
    verdicts = judge.judge(found, store.baselines(store.load(results_dir), kind))
    store.append(results_dir, store.rows(check_id, kind, verdicts, cluster.dilation))
    return Report(check_id, kind, cluster.hosts, cluster.dilation, tuple(verdicts), bisection,
                  tuple(session.failures), shaped, tuple(notes))


def blame(verdict: Verdict) -> str:
    """What a bad verdict names: a host's network card, a GPU, or a link between hosts."""
    probe, subject = verdict.measurement.probe, verdict.measurement.subject
    if probe == Probe.COMPUTE:
        return f"GPU {subject}"
    if probe in (Probe.EGRESS, Probe.ARRIVAL):
        return f"host {subject}'s network card ({'sending' if probe == Probe.EGRESS else 'receiving'})"
    return f"link {subject}"
