"""The input pipeline against the disk: loader-only images/s vs raw file reads of the same files.

Makes a dataset with `rosetta data make`'s generator (real JPEGs, 50-200 KB) in a temporary
folder, then, round by round and interleaved so that drift of a shared machine hits all alike:
- raw read: every file of the dataset read whole through the local storage backend (bytes only);
- loader: the torch_ddp worker's real input pipeline (harness.storage.backends + DataLoader, JPEG decode,
  random resized crop, flip, normalize) alone, no model, with 0 and with 2 loader workers,
  timed like the harness's loader_throughput column (a fresh iterator, after warm-up batches).
Both read from the page cache after the first round (the dataset was just written): the ratio is
the pipeline's own cost per image, not the disk's. Prints medians and ratios and appends them to
benchmarks/RESULTS.md with the machine.

--frameworks: instead, each framework's own input path side by side on the same dataset and worker count
(PyTorch DataLoader with worker processes, tf.data with that many threads, Chainer's MultiprocessIterator
with that many processes), each measurement in a fresh interpreter, frameworks interleaved round by round.
Usage: python benchmarks/loader.py [--rounds N] [--count IMAGES] [--image-size PX] [--frameworks [--workers W]]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.contract.axes import Device, Size, Storage, Strategy, Workload
from harness.contract.spec import RunSpec
from harness.contract.workloads import WORKLOADS
from harness.results import provenance
from harness.storage import backends as storage, datagen

HERE = Path(__file__).resolve().parent
BATCH = 16
WARMUP_BATCHES = 2


def raw_read(store: storage.Store, files: list[str]) -> tuple[float, float]:
    """Images/s and MB/s reading every file whole (no decoding)."""
    t0 = time.perf_counter()
    size = sum(len(store.read(f)) for f in files)
    seconds = time.perf_counter() - t0
    return len(files) / seconds, size / seconds / 1e6


PIPELINES = {  # framework -> the module of its input pipeline (a Pipeline class with next / loader_only)
    "torch": "frameworks.shared.pytorch.input_pipeline",  # DataLoader, worker processes
    "tf": "frameworks.shared.keras.input_pipeline",  # tf.data, parallel map threads
    "chainer": "frameworks.chainer.input_pipeline",  # MultiprocessIterator, pool processes
}


def loader_throughput(root: Path | str, workers: int, image_size: int, batches: int,
                      backend: str = "local", framework: str = "torch", **options) -> float:
    """Images/s of a framework's training input pipeline alone (default PyTorch's,
    frameworks/shared/pytorch/input_pipeline.py), reading the dataset at ``root`` (a folder, or a url of
    ``backend``; ``options``: its other storage options)."""
    import importlib

    if framework == "chainer":
        from frameworks.chainer.compat import import_chainer

        import_chainer()
    Pipeline = importlib.import_module(PIPELINES[framework]).Pipeline

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
    result = pipeline.loader_only(batches)
    if hasattr(pipeline, "close"):
        pipeline.close()
    return result


def loader_throughput_apart(framework: str, root: Path, workers: int, image_size: int, batches: int) -> float:
    """:func:`loader_throughput` in a fresh interpreter: no framework's threads or imports linger into
    another's measurement."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from benchmarks.loader import loader_throughput; "
            "print(json.dumps(loader_throughput(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), "
            "framework=sys.argv[6])))")
    out = subprocess.run([sys.executable, "-c", code, str(HERE.parent), str(root), str(workers), str(image_size),
                          str(batches), framework], capture_output=True, text=True, check=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return float(out.stdout.strip().splitlines()[-1])


def compare_frameworks(args: argparse.Namespace) -> None:
    """Loader-only images/s of the three frameworks' input paths, interleaved, medians into RESULTS.md."""
    rows: dict[str, list[float]] = {name: [] for name in PIPELINES}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        datagen.make(datagen.DataSpec(count=args.count, layout="files"), root)
        batches = max(1, (args.count - WARMUP_BATCHES * BATCH) // BATCH)
        for round_index in range(args.rounds):
            for name in PIPELINES:
                rows[name].append(loader_throughput_apart(name, root, args.workers, args.image_size, batches))
            print(f"round {round_index + 1}: " + " | ".join(f"{n} {v[-1]:.1f} images/s" for n, v in rows.items()))
    med = {k: statistics.median(v) for k, v in rows.items()}
    machine = provenance.machine()
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, load {os.getloadavg()[0]:.1f})"
    print("median " + ", ".join(f"{n} {v:.1f} images/s ({v / med['torch']:.2f}x torch)" for n, v in med.items()))
    results = HERE / "RESULTS.md"
    text = results.read_text()
    if FRAMEWORKS_HEADER not in text:
        text += FRAMEWORKS_HEADER
    text += (f"| {provenance.utc_now()} | {where} | {args.count} JPEGs, crop {args.image_size}, batch {BATCH} | "
             f"{args.workers} | {args.rounds} | " + " | ".join(f"{med[n]:.1f}" for n in PIPELINES) +
             f" | {med['tf'] / med['torch']:.2f} | {med['chainer'] / med['torch']:.2f} |\n")
    results.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=512, help="JPEGs in the dataset")
    parser.add_argument("--image-size", type=int, default=224, help="crop size of the pipeline (pixels)")
    parser.add_argument("--frameworks", action="store_true",
                        help="PyTorch DataLoader vs tf.data vs Chainer iterator instead of loader vs raw reads")
    parser.add_argument("--workers", type=int, default=2, help="loader workers (with --frameworks)")
    args = parser.parse_args()
    if args.frameworks:
        compare_frameworks(args)
        return
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

FRAMEWORKS_NOTE = ("tf.data decodes only the crop's window (tf.io.decode_and_crop_jpeg); Chainer and PyTorch run "
                   "the same Pillow decode and augment code (frameworks/shared/image_input.py), so the gap between "
                   "them is in the loaders themselves, not traced further. On 2 cores shared with other jobs the rounds "
                   "spread widely.")
FRAMEWORKS_HEADER = (
    "\n## Loader-only across frameworks, local disk (benchmarks/loader.py --frameworks; medians over rounds)\n\n"
    "Each framework's own input path alone, no model: the same JPEGs, shard, decode, random resized crop "
    "(frameworks/shared/image_input.AUGMENT), flip and normalize. PyTorch: DataLoader with W worker processes "
    "(Pillow); tf.data: W parallel map threads (tf.io.decode_and_crop_jpeg, reads in a tf.py_function); Chainer: "
    "MultiprocessIterator with W processes (Pillow). Each measurement in a fresh interpreter, frameworks "
    "interleaved round by round. " + FRAMEWORKS_NOTE + "\n\n"
    "| when (UTC) | machine | dataset | workers W | rounds | torch images/s | tf.data images/s | chainer images/s | "
    "tf.data / torch | chainer / torch |\n|---|---|---|---|---|---|---|---|---|---|\n")


if __name__ == "__main__":
    main()
