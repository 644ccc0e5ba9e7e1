"""One cluster check (``rosetta doctor``): the probes in order (compute first: its 1-rank runs leave a host's
card unshaped; then the shaping; then the links), each suspect re-probed before it is named, the bisection
over 4 hosts or more where a card, pair or ring is slow, every measurement
judged and stored, and what it found with its evidence. Exit status as compare's: 0 healthy, 1 a bad host,
link or GPU (or a probe that failed), 2 bad input (a UserError)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from harness.doctor import judge, probes, store
from harness.doctor.judge import MIN_BASELINE, Bisection, Probe, Reference, Verdict

HEALTHY, FOUND = 0, 1
REPEATS = 2  # a suspect's re-probes at most (each stops at the first sample that clears it)
LINKS = {Probe.EGRESS, Probe.PAIR, Probe.RING}  # the bandwidths a slow link shows in: then the bisection runs


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
        """Which reference the verdicts used, in words (the store's baseline, this check's peers' median)."""
        words = {Reference.BASELINE: "baseline", Reference.MEDIAN: "median of this check's peers (no baseline)"}
        used = sorted({words[v.reference] for v in self.verdicts if v.reference != Reference.NONE})
        return ", ".join(used) or "none"


def new_check_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("doctor-%Y%m%dT%H%M%S%fZ")


def run_check(cluster: probes.Cluster, results_dir: Path, compute: bool = True, machine_type: str | None = None,
              big_bytes: int = 4 << 20, iters: int = 3, repeats: int = REPEATS) -> Report:
    """Probe ``cluster``, re-probe each suspect up to ``repeats`` times (:func:`judge.confirm`), judge against the
    store's baseline for its machine type (else peer-relative), bisect where a link is slow, append the verdicts."""
    probes.check_reachable(cluster)
    check_id, kind = new_check_id(), machine_type or cluster.machine_type()
    results_dir = Path(results_dir).absolute()  # the ranks start in the repository, not here
    session = probes.Session(cluster, results_dir / "runs" / check_id, check_id, big_bytes=big_bytes, iters=iters)
    notes, baselines = [], store.baselines(store.load(results_dir), kind)
    again = lambda m: probes.remeasure(session, m)  # noqa: E731
    # the compute probes' suspects re-probed before the shaping (a 1-rank run leaves its host's card unshaped)
    found = judge.confirm(probes.compute_probes(session), baselines, again, repeats) if compute else []
    if compute and cluster.spec is None:
        notes.append("no compute probe: hosts given without a scenario (no workload to step)")
    shaped = probes.shape(cluster)
    found += judge.confirm(probes.link_probes(session), baselines, again, repeats)
    verdicts = judge.judge(found, baselines)
    bisection = None
    if len(cluster.hosts) < 4:
        notes.append(f"no bisection: {len(cluster.hosts)} hosts (halves need 2 hosts each)")
    elif any(v.bad and v.measurement.probe in LINKS for v in verdicts):
        bisection = judge.bisect(cluster.hosts, probes.ring_measure(session))
    else:
        notes.append("no bisection: no card, pair or ring judged slow")
    if any(v.reference == Reference.MEDIAN for v in verdicts):
        notes.append(f"peer-relative: no baseline for {kind} in the store ({MIN_BASELINE} healthy checks make one), "
                     f"so each figure is judged against the median and spread of this check's other hosts, GPUs or "
                     f"pairs: a fault every peer shares is not seen")
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
