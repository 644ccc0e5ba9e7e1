"""scenarios/mlperf_storage.toml (MLPerf Storage v2.0's run rules, rules = "mlperf_storage") against real servers
started here on free ports: each backend's set of runs (a warm-up run, then 5), each row's verdict.

Makes the dataset (`rosetta data make`'s JPEGs, --count of them: 2,000 are the scenario's 500-step epoch at
batch 4) in a temporary folder, starts SeaweedFS (S3), Azurite (Blob), NFS-Ganesha (NFSv4 through libnfs)
and a JuiceFS gateway in front of SeaweedFS with benchmarks/emulated_storage.py's Servers, uploads it, fills
the servers' addresses into the scenario and runs it one backend at a time (the tier's gateway restarted
with an empty block cache before its set). Prints per backend the set's verdict, the rules' AU and samples/s
and ours (means over the 5 runs after the warm-up run), the replication spread and how the page cache was
emptied, then every broken rule, and appends them to benchmarks/RESULTS.md with the machine and its load.
Usage: python benchmarks/mlperf_storage.py [--count 2000] [--backends local,nfs,s3,blob,juicefs]
       [--repeats N] [--steps N] [--compute-scale 24] [--results DIR] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.emulated_storage import Servers, run_scenario  # noqa: E402
from harness.base.environment import own_tools_first  # noqa: E402
from harness.reports import storage_rules  # noqa: E402
from harness.results import provenance, table as results_table  # noqa: E402
from harness.storage import datagen  # noqa: E402

HERE = Path(__file__).resolve().parent
SCENARIO = HERE.parent / "scenarios" / "mlperf_storage.toml"


def verdict_table(frame) -> str:
    """Per backend: the set's verdict, the rules' measures and ours, the spread, the page cache."""
    summary = storage_rules.storage_summary(results_table.to_frame(frame.to_dict("records")))
    spreads = frame.groupby("storage")["mlperf_replication_spread"].last() if "mlperf_replication_spread" in frame else {}
    lines = ["| storage | runs | MLPerf-compliant set | AU (rules) | AU (ours) | samples/s (rules) | samples/s (ours) | "
             "replication spread | page cache | could be cached | rules broken |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary.to_dict("records"):
        spread = spreads.get(r["storage"]) if len(spreads) else None
        broken = sorted({v.split(":")[0] for v in r.get("violations") or []})
        lines.append(f"| {r['storage']} | {r['runs']} | {'yes' if r.get('compliant') else 'no'} | {_pct(r.get('au_rules'))} | "
                     f"{_pct(r.get('au'))} | {_num(r.get('throughput_rules'))} | {_num(r.get('throughput'))} | "
                     f"{_pct(spread)} | {r['drop']} | {r['potentially_cached']}/{r['runs']} | {', '.join(broken) or '-'} |")
    return "\n".join(lines)


def violations(frame) -> str:
    """Each backend's broken rules, as its set's last row says them."""
    out = []
    for storage, rows in frame.sort_values("repeat").groupby("storage"):
        last = rows.iloc[-1]
        for v in json.loads(last["mlperf_violations"]) if isinstance(last.get("mlperf_violations"), str) else []:
            out.append(f"- {storage}: {v}")
    return "\n".join(out)


def _pct(value) -> str:
    return "-" if value is None or value != value else f"{value:.1%}"


def _num(value) -> str:
    return "-" if value is None or value != value else f"{value:.1f}"


def main() -> int:
    own_tools_first()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="JPEGs in the dataset (2,000: a 500-step epoch at batch 4)")
    parser.add_argument("--backends", default="local,nfs,s3,blob,juicefs")
    parser.add_argument("--repeats", type=int, default=0, help="runs per backend (default: the scenario's 6)")
    parser.add_argument("--steps", type=int, default=0, help="measured steps (default: the scenario's 499)")
    parser.add_argument("--compute-scale", type=float, default=0.0,
                        help="stretch the accelerator's step this many times instead of the scenario's 24")
    parser.add_argument("--results", type=Path, default=HERE.parent / "results" / "mlperf_storage")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rosetta-mlperf-"))
    data = work / "export" / "imagenet"
    manifest = datagen.make(datagen.parse_spec({"count": args.count, "layout": "files"}, "mlperf_storage"), data)
    backends = args.backends.split(",")
    machine = provenance.machine()
    with ExitStack() as stack:
        srv = Servers(stack, work, data, set(backends))
        for name, why in srv.missing.items():
            print(f"left out: {name}: {why}")
        path = SCENARIO
        if args.compute_scale:  # a copy of the scenario with another stretch
            text = SCENARIO.read_text().replace("compute_scale = 24.0", f"compute_scale = {args.compute_scale}")
            path = work / SCENARIO.name
            path.write_text(text)
        frame = run_scenario(path, srv, backends, None, args.results, repeats=args.repeats,
                             measured_steps=args.steps)
        load = os.getloadavg()[0]
    shutil.rmtree(work, ignore_errors=True)
    text = verdict_table(frame) + "\n\nRules broken (each set's last row):\n\n" + violations(frame)
    print(text)
    if not args.no_record:
        with open(HERE / "RESULTS.md", "a") as out:
            out.write(f"\n## MLPerf Storage's run rules on this machine (benchmarks/mlperf_storage.py, "
                      f"scenarios/mlperf_storage.toml), {provenance.utc_now()}\n\n{machine['cpu_model']} "
                      f"({machine['cpu_cores']} cores, shared; 1-minute load {load:.1f} at the end), "
                      f"{args.count} JPEGs ({manifest['total_bytes'] / 1e6:.0f} MB); compute stretched "
                      f"{args.compute_scale or 24:g}x; "
                      f"left out: {srv.missing or 'nothing'}.\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
