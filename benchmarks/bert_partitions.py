"""The seed's BERT-large partition experiment at this machine's scale: scenarios/storage_bert_partitions.toml
(emulated H100s at BERT-large's step, each rank streaming its own pre-tokenized partitions) from NFS and
from the JuiceFS cache tier, cold and warm, against real servers started here on free ports.

Makes the partitions (`rosetta data make --kind bert`: 32 of 2,000 sequences, 1.78 MB each, the published
1.8 GB / 1,000) in a temporary folder, starts NFS-Ganesha (exporting it, read through libnfs), SeaweedFS
and a JuiceFS gateway in front of it (the partitions written through the tier) with
benchmarks/emulated_storage.py's Servers, and runs the scenario one backend and size at a time (a cold
`juicefs` run gets a gateway with an empty block cache; `juicefs_warm` reads its share through the tier
first). Each rank's data record lists every partition it read to the end in the window, with the seconds
from opening it to its last byte (reading only; frameworks/shared/pytorch/text_pipeline.py). Prints the rows
and the per-partition load times, charts them per backend and number of ranks (measured only: the seed
published no numbers for this, only that Alluxio's were lower at 64 and 128 GPUs), and appends the
figures to benchmarks/RESULTS.md with the machine and its load.
Usage: python benchmarks/bert_partitions.py [--partitions 32] [--partition-samples 2000] [--sizes 2,4]
       [--backends nfs,juicefs,juicefs_warm] [--steps N] [--results DIR] [--no-record]
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

import pandas as pd  # noqa: E402

from benchmarks.emulated_storage import Servers, run_scenario  # noqa: E402
from harness.base.environment import own_tools_first  # noqa: E402
from harness.reports import charts, storage_charts  # noqa: E402
from harness.results import provenance  # noqa: E402
from harness.storage import datagen  # noqa: E402

HERE = Path(__file__).resolve().parent
SCENARIO = HERE.parent / "scenarios" / "storage_bert_partitions.toml"


def partition_loads(frame: pd.DataFrame) -> pd.DataFrame:
    """One line per partition a rank loaded in a run's window (its data record): storage, ranks, rank,
    path, bytes, seconds (reading), span_s (open to last byte, pauses included) and first (the loader
    process's first partition: its storage client's set-up is in it)."""
    lines = []
    for row in frame[frame["status"] == "ok"].itertuples():
        for rank in range(int(row.world_size)):
            path = Path(row.run_dir) / f"events-rank{rank}.jsonl"
            for event in map(json.loads, path.read_text().splitlines()):
                if event.get("event") == "data":
                    lines += [{"storage": row.storage, "ranks": int(row.world_size), "rank": rank, **p}
                              for p in event.get("partitions", [])]
    return pd.DataFrame(lines, columns=["storage", "ranks", "rank", "path", "bytes", "seconds", "span_s", "first"])


def table(frame: pd.DataFrame, loads: pd.DataFrame) -> str:
    """The rows' columns, and the load seconds of each loader's first partition apart from the others'."""
    lines = ["| storage | ranks | partitions loaded | load s p50 | load s max | MB/s per partition stream | "
             "first partition per loader s (median) | the others' s p50 | AU | data stall | cache tier hit rate |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in frame.sort_values(["world_size", "storage"], key=_order).itertuples():
        if r.status != "ok":
            lines.append(f"| {r.storage} | {r.world_size} | {r.status}: {r.reason} | | | | | | | | |")
            continue
        mine = loads[(loads["storage"] == r.storage) & (loads["ranks"] == r.world_size)]
        first, others = (mine[mine["first"] == flag]["seconds"].median() for flag in (True, False))
        hit = "-" if pd.isna(r.cache_hit_rate) else f"{r.cache_hit_rate:.2f}"
        lines.append(f"| {r.storage} | {r.world_size} | {r.partitions_loaded} | {r.partition_load_s_p50:.3f} | "
                     f"{r.partition_load_s_max:.3f} | {r.partition_load_mb_s:.1f} | {_s(first)} | {_s(others)} | "
                     f"{r.au:.1%} | {r.data_stall_frac:.1%} | {hit} |")
    return "\n".join(lines)


def _s(seconds: float) -> str:
    return "-" if pd.isna(seconds) else f"{seconds:.3f}"


def _order(column: pd.Series) -> pd.Series:
    return column.map(storage_charts.storage_order) if column.name == "storage" else column


def plot(loads: pd.DataFrame, path: Path) -> Path:
    """Every partition's load seconds (dots; hollow: a loader's first, its client's set-up in it) and
    their median (bar) per backend, one group per number of ranks; measured only: there are no published
    numbers to stand beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    backends = sorted(set(loads["storage"]), key=storage_charts.storage_order)
    sizes = sorted(set(loads["ranks"]))
    width = 0.8 / max(len(backends), 1)
    for i, backend in enumerate(backends):
        label = storage_charts.storage_label(backend)
        for j, ranks in enumerate(sizes):
            mine = loads[(loads["storage"] == backend) & (loads["ranks"] == ranks)]
            if mine.empty:
                continue
            x = j - 0.4 + width * (i + 0.5)
            ax.bar(x, mine["seconds"].median(), width=width * 0.9, color=f"C{i}", alpha=0.5,
                   label=label if j == 0 else None)
            for first, part in mine.groupby("first"):
                ax.scatter([x] * len(part), part["seconds"], s=14, zorder=3, edgecolors=f"C{i}",
                           facecolors="none" if first else f"C{i}")
    ax.set_xticks(range(len(sizes)), [f"{n} emulated H100s" for n in sizes])
    ax.set_ylabel("seconds reading one partition (open to last byte,\nthe trainer's pauses left out); hollow: a loader's first")
    ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    mb = loads["bytes"].median() / 1e6 if len(loads) else 0
    ax.set_title(f"BERT-large partitions ({mb:.2f} MB each): load time per partition, per rank\n"
                 "measured here only: the seed published no numbers (only 'lower with Alluxio at 64 and 128 GPUs')",
                 fontsize=9)
    return charts.save_figure(fig, path)


def main() -> int:
    own_tools_first()  # the environment's mpirun, torchrun, horovodrun, as `rosetta` does (not activated)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--partition-samples", type=int, default=2000, help="sequences per partition (889 bytes each)")
    parser.add_argument("--sizes", default="2,4", help="emulated accelerators (ranks) to run")
    parser.add_argument("--backends", default="nfs,juicefs,juicefs_warm")
    parser.add_argument("--steps", type=int, default=0, help="measured steps (default: the scenario's)")
    parser.add_argument("--results", type=Path, default=HERE.parent / "results" / "bert-partitions")
    parser.add_argument("--no-record", action="store_true", help="do not append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rosetta-bert-parts-"))
    data = work / "export" / "bert"
    manifest = datagen.make(datagen.parse_spec({"kind": "bert", "partitions": args.partitions,
                                                "partition_samples": args.partition_samples}, "bert_partitions"), data)
    machine = provenance.machine()
    backends = args.backends.split(",")
    with ExitStack() as stack:
        srv = Servers(stack, work, data, set(backends))
        for name, why in srv.missing.items():
            print(f"left out: {name}: {why}")
        frame = run_scenario(SCENARIO, srv, backends, [int(s) for s in args.sizes.split(",")], args.results,
                             measured_steps=args.steps)
        load = os.getloadavg()[0]
    shutil.rmtree(work, ignore_errors=True)  # the partitions and the servers' data; rows stay in --results
    loads = partition_loads(frame)
    text = table(frame, loads)
    chart = plot(loads, args.results / "bert-partitions.png")
    print(text)
    print(loads.to_string(index=False))
    print(f"chart: {chart}")
    if not args.no_record:
        where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, 1-minute load {load:.1f} at the end)"
        size = manifest["total_bytes"] / len(manifest["partitions"]) / 1e6
        with open(HERE / "RESULTS.md", "a") as out:
            out.write(f"\n## BERT-large partitions: load time per partition, NFS against the cache tier "
                      f"(benchmarks/bert_partitions.py), {provenance.utc_now()}\n\n{where}; {args.partitions} "
                      f"partitions of {args.partition_samples} sequences ({size:.2f} MB); left out: "
                      f"{srv.missing or 'nothing'}. No published numbers to compare (the seed says only that "
                      f"Alluxio's were lower at 64 and 128 GPUs).\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
