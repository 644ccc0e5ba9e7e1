"""The input pipeline against the disk: loader-only images/s vs raw file reads of the same files.

Makes a dataset with `rosetta data make`'s generator (real JPEGs, 50-200 KB) in a temporary
folder, then, round by round and interleaved so that drift of a shared machine hits all alike:
- raw read: every file of the dataset read whole through the local storage backend (bytes only);
- loader: the torch_ddp worker's real input pipeline (harness.storage + DataLoader, JPEG decode,
  random resized crop, flip, normalize) alone, no model, with 0 and with 2 loader workers,
  timed like the harness's loader_throughput column (a fresh iterator, after warm-up batches).
Both read from the page cache after the first round (the dataset was just written): the ratio is
the pipeline's own cost per image, not the disk's. Prints medians and ratios and appends them to
benchmarks/RESULTS.md with the machine.
Usage: python benchmarks/loader.py [--rounds N] [--count IMAGES] [--image-size PX]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

from harness import datagen, provenance, storage
from harness.axes import Device, Size, Storage, Strategy, Workload
from harness.spec import RunSpec
from harness.workloads import WORKLOADS

HERE = Path(__file__).resolve().parent
BATCH = 16
WARMUP_BATCHES = 2


def raw_read(store: storage.Store, files: list[str]) -> tuple[float, float]:
    """Images/s and MB/s reading every file whole (no decoding)."""
    t0 = time.perf_counter()
    size = sum(len(store.read(f)) for f in files)
    seconds = time.perf_counter() - t0
    return len(files) / seconds, size / seconds / 1e6


def loader_throughput(root: Path | str, workers: int, image_size: int, batches: int,
                      backend: str = "local", **options) -> float:
    """Images/s of the training input pipeline alone (frameworks/torch_ddp/input_pipeline.py), reading
    the dataset at ``root`` (a folder, or a url of ``backend``; ``options``: its other storage options)."""
    from frameworks.torch_ddp.input_pipeline import Pipeline

    options = dataclasses.asdict(storage.StorageOptions(url=str(root), verify_fraction=0.0, loader_workers=workers,
                                                        **options))
    spec = RunSpec(scenario="loader-bench", framework="torch_ddp", workload=Workload.RESNET50, size=Size.FULL,
                   workload_options={**WORKLOADS[Workload.RESNET50].options(Size.FULL), "image_size": image_size},
                   nodes=1, procs_per_node=1, batch_per_worker=BATCH, strategy=Strategy.ALLREDUCE,
                   storage=Storage(backend), repeat=0, warmup_steps=0, measured_steps=batches, timeout_s=600,
                   device=Device.CPU, seed=0, storage_options=options)
    pipeline = Pipeline(spec, 0, 1)
    for _ in range(WARMUP_BATCHES):  # start the loader's worker processes before the clock
        pipeline.next()
    return pipeline.loader_only(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=512, help="JPEGs in the dataset")
    parser.add_argument("--image-size", type=int, default=224, help="crop size of the pipeline (pixels)")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"raw": [], "raw_mb_s": [], "loader0": [], "loader2": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        manifest = datagen.make(datagen.DataSpec(count=args.count, layout="files"), root)
        files = [s["file"] for s in manifest["samples"]]
        store = storage.Store("local", {"url": str(root)})
        batches = max(1, (args.count - WARMUP_BATCHES * BATCH) // BATCH)
        for round_index in range(args.rounds):
            images_s, mb_s = raw_read(store, files)
            rows["raw"].append(images_s)
            rows["raw_mb_s"].append(mb_s)
            rows["loader0"].append(loader_throughput(root, 0, args.image_size, batches))
            rows["loader2"].append(loader_throughput(root, 2, args.image_size, batches))
            print(f"round {round_index + 1}: raw read {images_s:.0f} images/s ({mb_s:.0f} MB/s) | loader, 0 workers "
                  f"{rows['loader0'][-1]:.1f} images/s | loader, 2 workers {rows['loader2'][-1]:.1f} images/s")
    med = {k: statistics.median(v) for k, v in rows.items()}
    machine = provenance.machine()
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, load {os.getloadavg()[0]:.1f})"
    print(f"median raw read {med['raw']:.0f} images/s ({med['raw_mb_s']:.0f} MB/s); loader {med['loader0']:.1f} "
          f"images/s with 0 workers ({med['loader0'] / med['raw']:.4f} of raw), {med['loader2']:.1f} with 2 "
          f"({med['loader2'] / med['raw']:.4f} of raw)")
    results = HERE / "RESULTS.md"
    text = results.read_text()
    if LOADER_HEADER not in text:
        text += LOADER_HEADER
    text += (f"| {provenance.utc_now()} | {where} | {args.count} JPEGs, crop {args.image_size}, batch {BATCH} | "
             f"{args.rounds} | {med['raw']:.0f} ({med['raw_mb_s']:.0f} MB/s) | {med['loader0']:.1f} | "
             f"{med['loader2']:.1f} | {med['loader2'] / med['raw']:.4f} |\n")
    results.write_text(text)


LOADER_HEADER = ("\n## Loader-only vs raw read, local disk (benchmarks/loader.py; medians over rounds)\n\n"
                 "Raw read: the same files read whole, no decoding. Loader: the training input pipeline alone "
                 "(decode, random resized crop, flip, normalize), as the harness's loader_throughput column.\n\n"
                 "| when (UTC) | machine | dataset | rounds | raw read images/s | loader images/s, 0 workers | "
                 "loader images/s, 2 workers | loader (2) / raw |\n|---|---|---|---|---|---|---|---|\n")


if __name__ == "__main__":
    main()
