"""The per-rank attribution scored against planted faults: 16 emulated GPUs (V100 profile, ResNet-50 at its tiny
size: 25.6 M parameters, 102 MB of gradients) on 4 network-namespace hosts (PCIe3 inside, 10GbE between),
torch_ddp over torchrun, with one fault of each kind ([faults], harness/machines/faults.py) at seeded
placements, and fault-free runs.

For each run the attribution (harness/results/attribution.py, the row's slowest_rank, slowest_host,
straggler_score and attribution_phase) is scored against the planted fault, beside a naive detector: the
rank with the longest mean step (its host; it names no kind):

- named: the detector calls the run faulty (attribution: straggler_score >= CLEAN_SCORE; naive: always)
- right place: the fault's rank named first (slow_gpu, intermittent) or its host (the others)
- right kind: the phase named is the fault's (compute: compute; exchange: link; data: input; rest: host)
- recall per fault kind: its runs called faulty with the right place (and the right kind);
  precision per kind blamed: the runs so blamed, clean ones included, with the right place and kind;
  false positives: fault-free runs called faulty (benchmarks/planted_cluster.py's score_table)

and the time each detector takes on the run's records (read from its folder; the attribute call alone).
Appends the table to benchmarks/RESULTS.md. Needs root (network namespaces).
Usage: python benchmarks/attribution.py [--placements N] [--clean M] [--first-seed S] [--steps S] [--kinds ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import statistics
import tempfile
import time
from pathlib import Path

from harness.contract.events import read_rank
from harness.experiment import scenario
from harness.launchers.hosts import namespace_hosts
from harness.machines.faults import BLAME, RANK_KINDS, FaultKind
from harness.results import provenance
from harness.results.attribution import attribute
from harness.running.runner import run_sweep

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.planted_cluster import NODES, Call, pct, scenario_doc, score_table  # noqa: E402

HERE = Path(__file__).resolve().parent
# gradients exchanged at 1/8 of their size over links 8 x slower (docs/scaling.md): the same exchange time, 1/8
# of the bytes this machine's CPU copies and DDP broadcasts at the run's start, most of a run's cost here
GRADIENT_SCALE = 8
CLEAN_SCORE = 1.05  # attribution calls a run faulty from this straggler score (own time / the median rank's)
# each kind's size: 20% and more, as the goal has it; a network card at half its rate; 1 ms more
# latency a packet (40 x 10GbE's 25 us); intermittent: 1.5 x every 2nd step (the mean slowdown 25%)
FAULTS = {FaultKind.SLOW_GPU: {"factor": 1.3}, FaultKind.INTERMITTENT: {"factor": 1.5, "every": 2},
          FaultKind.SLOW_NIC: {"rate_fraction": 0.5}, FaultKind.LONG_LINK: {"latency_s": 1e-3},
          FaultKind.SLOW_LOADER: {"factor": 1.3}, FaultKind.CPU_HOG: {"factor": 1.3}}


def _naive(ranks) -> tuple[int, str]:
    slowest = max(ranks, key=lambda r: statistics.fmean(r.step_seconds))
    return slowest.rank, (slowest.hello or {}).get("host")


def _score(row: dict) -> dict:
    """One run's verdicts (attribution's and the naive one's) against its planted fault, and their times."""
    ranks = [read_rank(Path(row["run_dir"]), r) for r in range(row["world_size"])]
    start = time.perf_counter()
    found = attribute(ranks)
    attribution_s = time.perf_counter() - start
    start = time.perf_counter()
    naive_rank, naive_host = _naive(ranks)
    naive_s = time.perf_counter() - start
    kind = FaultKind(row["fault_kind"]) if row.get("fault_kind") else None
    on_rank = kind in RANK_KINDS

    def right(rank, host) -> bool:
        return kind is not None and (rank == row["fault_rank"] if on_rank else host == row["fault_host"])

    named_rank = None if found.link_named else found.slowest.rank  # a slow link names its host alone
    return {"kind": kind, "named": found.straggler_score >= CLEAN_SCORE or found.link_named,
            "score": found.straggler_score, "link_score": found.link_score, "place": right(named_rank, found.host),
            "blame": kind is not None and found.kind == BLAME[kind].value, "phase": found.kind,
            "naive_place": right(naive_rank, naive_host), "attribution_s": attribution_s, "naive_s": naive_s,
            "run_s": row["run_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--placements", type=int, default=40, help="seeded placements per fault kind")
    parser.add_argument("--clean", type=int, default=10, help="fault-free runs")
    parser.add_argument("--first-seed", type=int, default=0, help="the first placement's seed (default 0)")
    parser.add_argument("--steps", type=int, default=4, help="measured steps per run")
    parser.add_argument("--kinds", default=",".join(k.value for k in FAULTS), help="fault kinds, comma-separated")
    parser.add_argument("--no-report", action="store_true", help="print the table, do not append it to RESULTS.md")
    parser.add_argument("--keep", default="", help="keep the runs' results in this folder (default: a temporary one)")
    args = parser.parse_args()
    kinds = [FaultKind(k) for k in args.kinds.split(",") if k]
    scores: list[dict] = []
    loads: list[float] = []
    with namespace_hosts(NODES, prefix="rosetta-attr") as hosts, tempfile.TemporaryDirectory() as tmp:
        plan = [(None, seed) for seed in range(args.clean)]
        seeds = range(args.first_seed, args.first_seed + args.placements)
        plan += [(kind, seed) for seed in seeds for kind in kinds]  # kinds interleaved, the clean runs among them
        plan.sort(key=lambda p: (p[1], p[0] is not None))
        for kind, seed in plan:
            fault = {"kind": kind.value, "seed": seed, **FAULTS[kind]} if kind else None
            name = f"{kind.value if kind else 'clean'}-{seed}"
            start = time.perf_counter()
            [row] = run_sweep(scenario.parse(scenario_doc(hosts, name, args.steps, 1200, fault, GRADIENT_SCALE), "attribution", name),
                              Path(args.keep or tmp) / "results")
            row["run_s"] = time.perf_counter() - start
            loads.append(os.getloadavg()[0])
            if row["status"] != "ok":
                print(f"{name}: {row['status']}: {row.get('reason')}")
                continue
            scores.append(_score(row))
            s = scores[-1]
            print(f"{name}: score {s['score']:.3f} link {s['link_score'] or 0:.3f} kind {s['phase']} place {s['place']} blame {s['blame']} "
                  f"naive {s['naive_place']} ({row['run_s']:.0f} s)", flush=True)
    report(scores, args, loads)


def _call(s: dict) -> Call:
    """The attribution's verdict on one run as the shared score table reads it."""
    kind = s["kind"]
    return Call(kind.value if kind else None, BLAME[kind].value if kind else None,
                s["phase"] if s["named"] else None, s["place"])


def report(scores: list[dict], args: argparse.Namespace, loads: list[float]) -> None:
    lines = ["| planted | runs | median score | naive: right place |", "|---|---:|---:|---:|"]
    for kind in [None, *FAULTS]:
        runs = [s for s in scores if s["kind"] == kind]
        if runs:
            lines.append(f"| {kind.value + ' ' + str(FAULTS[kind]) if kind else 'none (fault-free)'} | {len(runs)} | "
                         f"{statistics.median(s['score'] for s in runs):.3f} | "
                         f"{pct(sum(s['naive_place'] for s in runs), len(runs)) if kind else '-'} |")
    naive_precision = pct(sum(s["naive_place"] for s in scores), len(scores))
    times = (f"attribution {1e3 * statistics.median(s['attribution_s'] for s in scores):.2f} ms a run, naive "
             f"{1e3 * statistics.median(s['naive_s'] for s in scores):.3f} ms (on the records read); a run "
             f"{statistics.median(s['run_s'] for s in scores):.0f} s (median, wall)") if scores else "-"
    machine = provenance.machine()
    text = (f"\n## Attribution against planted faults ({provenance.utc_now()[:16]} UTC, benchmarks/attribution.py)\n\n"
            f"16 emulated V100s (ResNet-50 tiny, batch 64, exact steps) on 4 hosts (PCIe3, 10GbE), torch_ddp, "
            f"k = 16, gradient_scale {GRADIENT_SCALE}, {args.steps} measured steps a run; {args.placements} seeded placements per fault kind "
            f"(seeds {args.first_seed}-{args.first_seed + args.placements - 1}) and {args.clean} fault-free runs. "
            f"Called faulty from a straggler score of {CLEAN_SCORE}; the kind named is the phase blamed "
            f"(compute: compute, exchange: link, data: input, rest: host). The naive detector (the rank with the "
            f"longest mean step) calls every run faulty: right place {naive_precision} of all runs. Time: {times}. "
            f"Machine: {machine.get('cpu_model')}, {machine.get('cpu_cores')} cores, shared with other sessions' "
            f"tests (load average over the runs: median {statistics.median(loads) if loads else float('nan'):.1f}, "
            f"max {max(loads, default=float('nan')):.1f}).\n\n"
            + "\n".join(score_table([_call(s) for s in scores])) + "\n\n" + "\n".join(lines) + "\n")
    print(text)
    if args.no_report:
        return
    with open(HERE / "RESULTS.md", "a") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
