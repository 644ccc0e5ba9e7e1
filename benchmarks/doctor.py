"""The cluster check (``rosetta doctor``, harness/doctor/) against planted faults: 16 emulated GPUs (V100 profile,
ResNet-50 at its tiny size) on 4 network-namespace hosts (PCIe3 inside, 10GbE between, dilation 16), with a
network card at half its rate (slow_nic 0.5) or a GPU 20% slow (slow_gpu 1.2) at seeded placements
([faults], harness/machines/faults.py), and fault-free checks.

Each check runs every probe (16 one-rank compute probes, the 4 hosts at once; each card both ways, the 6 pairs,
the ring; each suspect re-probed; the bisection where a link is slow) with an empty store (so peer-relative:
against the median and spread of the others) and is scored: its first finding is
right where it names the planted host's card (slow_nic) or the planted GPU (slow_gpu); a fault-free check is
right where it finds nothing. Scored as benchmarks/attribution.py is (planted_cluster.score_table): recall
per kind, precision per class blamed (a GPU: compute; a card, pair or ring: link), false positives. Appends the table to benchmarks/RESULTS.md. Needs root (network namespaces).
Usage: python benchmarks/doctor.py [--placements N] [--clean M] [--kinds slow_nic,slow_gpu] [--first-seed S]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from harness.doctor import check, judge, probes
from harness.experiment import scenario
from harness.launchers.hosts import namespace_hosts
from harness.machines.faults import FaultKind
from harness.results import provenance

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.planted_cluster import NODES, PROCS, Call, scenario_doc, score_table  # noqa: E402

HERE = Path(__file__).resolve().parent
FAULTS = {FaultKind.SLOW_NIC: {"rate_fraction": 0.5}, FaultKind.SLOW_GPU: {"factor": 1.2}}
CLASS = {FaultKind.SLOW_NIC: "link", FaultKind.SLOW_GPU: "compute"}  # what a fault slows, as a finding names it


def _call(kind: FaultKind | None, first: judge.Verdict | None, right: bool) -> Call:
    """A check's first finding as the shared score table reads it: a GPU's (compute) or a card's, pair's or
    ring's (link); ``right``: it names the planted card (its sending side) or GPU."""
    called = None if first is None else ("compute" if first.measurement.probe == judge.Probe.COMPUTE else "link")
    return Call(kind.value if kind else None, CLASS[kind] if kind else None, called, first is not None and right)


def _planted(cluster: probes.Cluster) -> str | None:
    """What the check should name first: the card's host, or the GPU as host/gpuN; None fault-free."""
    fault = (cluster.spec.emulation or {}).get("fault")
    if not fault:
        return None
    if fault["kind"] == FaultKind.SLOW_NIC.value:
        return cluster.hosts[fault["host"]]
    return f"{cluster.hosts[fault['rank'] // PROCS]}/gpu{fault['rank'] % PROCS}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placements", type=int, default=1, help="seeded placements per fault kind (default 1)")
    parser.add_argument("--clean", type=int, default=0, help="fault-free checks (default 0)")
    parser.add_argument("--kinds", default=",".join(k.value for k in FAULTS), help="comma-separated fault kinds")
    parser.add_argument("--first-seed", type=int, default=0, help="the first placement's seed (default 0)")
    parser.add_argument("--no-report", action="store_true", help="print the table, do not append it to RESULTS.md")
    args = parser.parse_args()
    kinds = [FaultKind(k) for k in args.kinds.split(",") if k]
    plan = [(kind, {"kind": kind.value, "seed": seed, **FAULTS[kind]}) for kind in kinds
            for seed in range(args.first_seed, args.first_seed + args.placements)] + [(None, None)] * args.clean
    lines, calls, before = [], [], _uptime()
    with namespace_hosts(NODES, prefix="rosetta-doctor") as hosts, tempfile.TemporaryDirectory() as tmp:
        for index, (kind, fault) in enumerate(plan):
            cluster = probes.from_loaded(scenario.parse(scenario_doc(hosts, "doctor", 4, 600, fault), "doctor benchmark", "doctor"), "benchmark")
            started = time.perf_counter()
            done = check.run_check(cluster, Path(tmp) / f"r{index}")  # an empty store each: the median of the others
            seconds, load = time.perf_counter() - started, os.getloadavg()[0]
            first = done.findings[0] if done.findings else None
            named = first.measurement.subject if first else None
            want = _planted(cluster)
            right = named == want and (want is None or first.measurement.probe.value in ("egress", "compute"))
            evidence = first.evidence() if first else "-"
            lines.append(f"| {kind.value if kind else 'none'} | {want or '-'} | {check.blame(first) if first else 'healthy'} "
                         f"| {'yes' if right else 'no'} | {evidence} | {len(done.findings)} | {seconds:.0f} s | "
                         f"{load:.1f} |")
            calls.append(_call(kind, first, right))
            print(lines[-1], flush=True)
            for v in done.findings:  # every finding, not only the first: what a wrong first one hid
                print(f"    {check.blame(v)}: {v.evidence()} (margin {judge.margin(v):.2f})", flush=True)
    report(lines, calls, args, (before, _uptime()))


def _uptime() -> str:
    """The machine's load averages (1, 5, 15 min) now, as uptime gives them."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def report(lines: list[str], calls: list[Call], args: argparse.Namespace, load: tuple[str, str]) -> None:
    text = "\n".join([
        "", f"## The cluster check against planted faults ({provenance.utc_now()[:10]}, `benchmarks/doctor.py`)", "",
        f"16 emulated V100s on 4 namespace hosts (10GbE between, dilation 16), every probe, an empty store (each "
        f"figure peer-relative: against the median and spread of the others, each suspect re-probed up to "
        f"{check.REPEATS} times); {args.placements} placement(s) per kind, {args.clean} fault-free. Right: the first "
        f"finding names the planted host's card or GPU (fault-free: nothing). Load average (1, 5, 15 min) "
        f"{load[0]} before, {load[1]} after.", "",
        "| fault | planted | first finding | right | evidence | findings | check took | load (1 min) |",
        "|---|---|---|---|---|---:|---:|---:|", *lines, "", *score_table(calls), ""])
    print(text)
    if not args.no_report:
        with open(HERE / "RESULTS.md", "a") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
