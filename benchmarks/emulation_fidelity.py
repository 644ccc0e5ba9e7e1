"""The emulation's fidelity on this CPU: the same backend, the same loader, the same compute time per
step, spent once as the emulation spends it (a calibrated sleep) and once as a real step of known length
(a busy loop on the rank's core: `step = "spin"` in [emulation]); AU and throughput side by side, runs
alternated round by round so that the shared machine's drift hits both alike.

Two loader settings: 0 workers (the rank reads and decodes between steps, as with no prefetch) and 1
worker process (reads overlap the step). A sleeping step leaves its core to the loader; a busy one does
not, as a CPU training step would not, while a GPU's step would: where the two differ with a worker,
that is the CPU step's contention, which an emulated GPU rightly does not have.
Usage: python benchmarks/emulation_fidelity.py [--rounds 3] [--compute-s 0.1] [--count 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.base.environment import own_tools_first  # noqa: E402
from harness.experiment import scenario  # noqa: E402
from harness.results import provenance  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402
from harness.storage import datagen  # noqa: E402

HERE = Path(__file__).resolve().parent

TEXT = """
name = "fidelity"
[settings]
warmup_steps = 2
measured_steps = {steps}
repeats = 1
timeout_s = 600
device = "emulated"
[emulation]
compute_s = {compute_s}
step = "{step}"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "small"
procs_per_node = {procs}
batch_per_worker = {batch}
storage = "local"
[storage_options.local]
url = "{url}"
loader_workers = {workers}
"""


def measure(data: Path, work: Path, step: str, workers: int, args) -> dict:
    """One run; its row."""
    text = TEXT.format(steps=args.steps, compute_s=args.compute_s, step=step, procs=args.procs, batch=args.batch,
                       url=data, workers=workers)
    path = work / f"{step}-{workers}.toml"
    path.write_text(text)
    row, = run_sweep(scenario.load(path), work / "results")
    if row["status"] != "ok":
        raise RuntimeError(f"{step}, {workers} workers: {row['status']}: {row['reason']}")
    return row


def compare(data: Path, work: Path, workers: int, args) -> dict[str, float]:
    """Median AU and throughput of sleep and spin runs, alternated, and their ratios (sleep / spin)."""
    runs: dict[str, list[dict]] = {"sleep": [], "spin": []}
    for index in range(args.rounds):
        for step in (("sleep", "spin") if index % 2 == 0 else ("spin", "sleep")):
            runs[step].append(measure(data, work, step, workers, args))
    med = {step: {k: statistics.median(r[k] for r in rows) for k in ("au", "throughput", "data_stall_frac")}
           for step, rows in runs.items()}
    return {"workers": workers, **{f"{k}_{s}": med[s][k] for s in med for k in med[s]},
            "au_ratio": med["sleep"]["au"] / med["spin"]["au"],
            "throughput_ratio": med["sleep"]["throughput"] / med["spin"]["throughput"],
            "au_spread_sleep": max(r["au"] for r in runs["sleep"]) - min(r["au"] for r in runs["sleep"]),
            "au_spread_spin": max(r["au"] for r in runs["spin"]) - min(r["au"] for r in runs["spin"])}


def main() -> int:
    own_tools_first()  # the environment's mpirun, torchrun, horovodrun, as `rosetta` does (not activated)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compute-s", type=float, default=0.1, help="compute time per step (s)")
    parser.add_argument("--count", type=int, default=200, help="JPEGs in the dataset")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rosetta-fidelity-"))
    data = work / "imagenet"
    datagen.make(datagen.parse_spec({"count": args.count, "layout": "files"}, "fidelity"), data)
    machine = provenance.machine()
    rows = [compare(data, work, workers, args) for workers in (0, 1)]
    shutil.rmtree(work, ignore_errors=True)
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, 1-minute load {os.getloadavg()[0]:.1f} at the end)"
    lines = [f"{where}; local folder, {args.procs} rank(s), batch {args.batch} (64-pixel crops), compute "
             f"{args.compute_s} s per step, {args.steps} steps, {args.rounds} rounds alternated, medians.", "",
             "| loader workers | AU sleep | AU spin | AU sleep / spin | samples/s sleep | samples/s spin | "
             "samples/s sleep / spin | data stall sleep | data stall spin | AU spread sleep, spin |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['workers']} | {r['au_sleep']:.3f} | {r['au_spin']:.3f} | {r['au_ratio']:.3f} | "
                     f"{r['throughput_sleep']:.1f} | {r['throughput_spin']:.1f} | {r['throughput_ratio']:.3f} | "
                     f"{r['data_stall_frac_sleep']:.1%} | {r['data_stall_frac_spin']:.1%} | "
                     f"{r['au_spread_sleep']:.3f}, {r['au_spread_spin']:.3f} |")
    table = "\n".join(lines)
    print(table)
    if not args.no_record:
        with open(HERE / "RESULTS.md", "a") as out:
            out.write(f"\n## Emulation fidelity: sleep against a busy step of the same length "
                      f"(benchmarks/emulation_fidelity.py), {provenance.utc_now()}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
