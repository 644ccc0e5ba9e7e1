"""Files vs tar shards (and BERT partitions) on local disk and S3, side by side: the same samples read
as one object each or streamed from a few large objects, round by round and interleaved so that drift
of a shared machine hits all alike.

Makes an image dataset with both layouts (real JPEGs, 50-200 KB; tar shards of --shard-samples) and a
BERT partition dataset (seq 128, the bert workload's vocabulary) in a temporary folder, uploads both to
SeaweedFS (S3 on 127.0.0.1). Per round, backend and layout:
- raw read: every object read front to back through harness.storage.backends (files: whole objects; shards and
  partitions: streamed), fresh connection per round, no decoding: samples/s and MB/s;
- loader: the torch_ddp worker's input pipeline alone (images: decode, crop 64, flip; BERT: records to
  model batches), 2 loader workers, no model: samples/s.
The server shares this machine's cores with the reader and the local files sit in the page cache: the
ratios are per-object protocol cost on loopback, not a network's or a disk's. Prints medians and the
shards / files ratios and appends them to benchmarks/RESULTS.md with the machine.
Usage: python benchmarks/layout_read.py [--rounds N] [--count IMAGES] [--shard-samples N] [--no-loader]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.loader import BATCH, loader_throughput  # noqa: E402
from harness.results import provenance  # noqa: E402
from harness.storage import backends as storage, datagen  # noqa: E402
from testbed import servers as storage_servers  # noqa: E402

HERE = Path(__file__).resolve().parent
IMAGE_SIZE = 64
BERT_PARTITIONS, BERT_RECORDS = 4, 8192  # 4 x 7.3 MB


def raw_read(store: storage.Store, rels: list[str], samples: int) -> tuple[float, float]:
    """Samples/s and MB/s reading every object front to back, streamed (no decoding)."""
    t0 = time.perf_counter()
    size = sum(store.drain(rel, block=1 << 20) for rel in rels)
    seconds = time.perf_counter() - t0
    return samples / seconds, size / seconds / 1e6


def bert_loader(url: str, backend: str, batches: int, **options) -> float:
    """Sequences/s of the BERT partition pipeline alone (records to model batches, 2 workers)."""
    from frameworks.shared.pytorch.input_pipeline import Pipeline
    from harness.contract.axes import Device, Size, Storage, Strategy, Workload
    from harness.contract.spec import RunSpec
    from harness.contract.workloads import WORKLOADS

    opts = dataclasses.asdict(storage.StorageOptions(url=url, verify_fraction=0.0, loader_workers=2, **options))
    spec = RunSpec(scenario="layout-bench", framework="torch_ddp", workload=Workload.BERT, size=Size.SMALL,
                   workload_options=WORKLOADS[Workload.BERT].options(Size.SMALL), nodes=1, procs_per_node=1,
                   batch_per_worker=BATCH, strategy=Strategy.ALLREDUCE, storage=Storage(backend), repeat=0,
                   warmup_steps=0, measured_steps=batches, timeout_s=600, device=Device.CPU, seed=0,
                   storage_options=opts)
    pipeline = Pipeline(spec, 0, 1)
    for _ in range(2):
        pipeline.next_batch()
    return pipeline.loader_only(batches)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=300, help="JPEGs in the image dataset")
    parser.add_argument("--shard-samples", type=int, default=32, help="JPEGs per tar shard")
    parser.add_argument("--no-loader", action="store_true", help="raw reads only")
    args = parser.parse_args()
    key, secret = "rosetta-bench", secrets.token_hex(16)
    os.environ.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
    rows: dict[tuple[str, str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        images, text = tmp / "imagenet", tmp / "bert"
        manifest = datagen.make(datagen.DataSpec(count=args.count, layout="both", shard_samples=args.shard_samples),
                                images)
        text_manifest = datagen.make(datagen.DataSpec(kind="bert", partitions=BERT_PARTITIONS,
                                                      partition_samples=BERT_RECORDS), text)
        objects = {"files": [s["file"] for s in manifest["samples"]],
                   "shards": [s["path"] for s in manifest["shards"]],
                   "bert": [p["path"] for p in text_manifest["partitions"]]}
        samples = {"files": args.count, "shards": args.count, "bert": BERT_PARTITIONS * BERT_RECORDS}
        with storage_servers.seaweedfs(tmp / "weed", key, secret) as s3_url:
            roots = {"local": {"imagenet": str(images), "bert": str(text)},
                     "s3": {"imagenet": "s3://bench/imagenet", "bert": "s3://bench/bert"}}
            storage.Store("s3", {"url": "s3://bench/x", "endpoint_url": s3_url}).fs.mkdir("bench")
            for name, root in (("imagenet", images), ("bert", text)):
                storage.upload(root, "s3", {"url": roots["s3"][name], "endpoint_url": s3_url})
            extra = {"local": {}, "s3": {"endpoint_url": s3_url}}
            image_batches = max(1, (args.count - 2 * BATCH) // BATCH)
            for round_index in range(args.rounds):
                line = []
                for backend in ("local", "s3"):
                    for layout in ("files", "shards", "bert"):
                        url = roots[backend]["bert" if layout == "bert" else "imagenet"]
                        store = storage.Store(backend, {"url": url, **extra[backend]})
                        per_s, mb_s = raw_read(store, objects[layout], samples[layout])
                        rows.setdefault((backend, layout, "raw"), []).append(per_s)
                        rows.setdefault((backend, layout, "raw_mb_s"), []).append(mb_s)
                        if not args.no_loader:
                            if layout == "bert":
                                loader = bert_loader(url, backend, 64, **extra[backend])
                            else:
                                loader = loader_throughput(url, 2, IMAGE_SIZE, image_batches, backend=backend,
                                                           layout=layout, **extra[backend])
                            rows.setdefault((backend, layout, "loader"), []).append(loader)
                        line.append(f"{backend}/{layout} {per_s:.0f}/s ({mb_s:.0f} MB/s)"
                                    + ("" if args.no_loader else f", loader {rows[(backend, layout, 'loader')][-1]:.0f}"))
                print(f"round {round_index + 1}: " + " | ".join(line), flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    nan = float("nan")
    machine = provenance.machine()
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, load {os.getloadavg()[0]:.1f})"
    when = provenance.utc_now()
    text_rows = ""
    for backend in ("local", "s3"):
        for layout in ("files", "shards", "bert"):
            raw, mb, loader = (med.get((backend, layout, m), nan) for m in ("raw", "raw_mb_s", "loader"))
            vs = "" if layout != "shards" else (f"{raw / med[(backend, 'files', 'raw')]:.2f}x raw, "
                                                 f"{loader / med.get((backend, 'files', 'loader'), nan):.2f}x loader")
            unit = "sequences" if layout == "bert" else "images"
            print(f"{backend:>6} {layout:>6}: raw {raw:.0f} {unit}/s ({mb:.0f} MB/s); loader {loader:.0f} {unit}/s"
                  + (f"; shards/files {vs}" if vs else ""))
            text_rows += (f"| {when} | {where} | {args.rounds} | {backend} | {layout} | {raw:.0f} {unit}/s | {mb:.0f} | "
                          f"{loader:.0f} | {vs or '-'} |\n")
    results = HERE / "RESULTS.md"
    text = results.read_text()
    header = HEADER.format(count=args.count, shard=args.shard_samples, parts=BERT_PARTITIONS, recs=BERT_RECORDS)
    if header not in text:
        text += header
    results.write_text(text + text_rows)
    return 0


HEADER = ("\n## Files vs tar shards (and BERT partitions) on local disk and S3 (benchmarks/layout_read.py; "
          "medians over interleaved rounds)\n\n"
          "Images: {count} JPEGs (50-200 KB) as files, or as tar shards of {shard}; BERT: {parts} partitions of "
          "{recs} sequences (seq 128, 889 bytes each). Raw: every object read front to back through "
          "harness.storage.backends, fresh connection per round. Loader: the input pipeline alone, 2 workers (images "
          "cropped to 64). s3: SeaweedFS on 127.0.0.1.\n\n"
          "| when (UTC) | machine | rounds | storage | layout | raw | raw MB/s | loader samples/s | shards / files |\n"
          "|---|---|---|---|---|---|---|---|---|\n")


if __name__ == "__main__":
    sys.exit(main())
