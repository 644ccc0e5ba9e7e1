"""NFS beside local disk and S3: the same dataset read whole, object by object, and through the input
pipeline alone, round by round and interleaved so that drift of a shared machine hits all alike.

Makes a dataset with `rosetta data make`'s generator (real JPEGs, 50-200 KB) in a temporary folder,
exports that folder with NFS-Ganesha (NFSv4 on 127.0.0.1, read through libnfs: nothing mounted) and
uploads it to SeaweedFS (S3 on 127.0.0.1). Per round and backend:
- raw read: every object read whole through harness.storage.backends (a fresh connection each round), no decoding;
- loader: the torch_ddp worker's input pipeline alone (decode, crop, flip), 2 loader workers, no model.
--nfsv3 adds NFSv3 (libnfs' fastest protocol), served beside NFSv4 by the same NFS-Ganesha, which
registers it with a stand-in for rpcbind in a mount namespace of its own (testbed/servers.py):
the shared machine's port 111 is never used, and the client is told the MOUNT port.
All servers share this machine's cores with the reader, and the local files sit in the page cache: the
ratios are per-object protocol cost on loopback, not a network's or a disk's. Prints medians and ratios
to local disk and appends them to benchmarks/RESULTS.md with the machine.
Usage: python benchmarks/storage_read.py [--rounds N] [--count IMAGES] [--no-loader] [--nfsv3]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.loader import loader_throughput, raw_read  # noqa: E402
from harness.results import provenance  # noqa: E402
from harness.storage import backends as storage, datagen  # noqa: E402
from testbed import servers as storage_servers  # noqa: E402

HERE = Path(__file__).resolve().parent
IMAGE_SIZE = 64  # the storage scenario's crop (resnet50 small): decoding, not cropping, is the CPU cost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=300, help="JPEGs in the dataset")
    parser.add_argument("--no-loader", action="store_true", help="raw reads only")
    parser.add_argument("--nfsv3", action="store_true", help="also NFSv3 (root: ganesha's own mount namespace)")
    args = parser.parse_args()
    key, secret = "rosetta-bench", secrets.token_hex(16)
    os.environ.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = tmp / "export" / "imagenet"
        manifest = datagen.make(datagen.DataSpec(count=args.count, layout="files"), root)
        files = [s["file"] for s in manifest["samples"]]
        mount_port = storage_servers.free_port() if args.nfsv3 else None
        with storage_servers.nfs_ganesha(root.parent, tmp / "ganesha", nfsv3_mount_port=mount_port) as nfs_url, \
                storage_servers.seaweedfs(tmp / "weed", key, secret) as s3_url:
            # label -> (backend, options)
            backends = {"local": ("local", {"url": str(root)}), "nfs (v4)": ("nfs", {"url": f"{nfs_url}/imagenet"})}
            if args.nfsv3:  # NFSv3 mounts the export by its path on the server, through MOUNT on its port
                backends["nfs (v3)"] = ("nfs", {"url": f"{nfs_url.rsplit('/', 1)[0]}{root}", "nfs_version": 3,
                                                "nfs_mount_port": mount_port})
            backends["s3"] = ("s3", {"url": "s3://bench/imagenet", "endpoint_url": s3_url})
            storage.Store("s3", backends["s3"][1]).fs.mkdir("bench")
            storage.upload(root, "s3", backends["s3"][1])
            rows = {(b, m): [] for b in backends for m in ("raw", "raw_mb_s", "loader")}
            batches = max(1, (args.count - 2 * 16) // 16)
            for round_index in range(args.rounds):
                line = []
                for name, (backend, options) in backends.items():
                    images_s, mb_s = raw_read(storage.Store(backend, options), files)
                    rows[(name, "raw")].append(images_s)
                    rows[(name, "raw_mb_s")].append(mb_s)
                    if not args.no_loader:
                        rows[(name, "loader")].append(loader_throughput(
                            options["url"], 2, IMAGE_SIZE, batches, backend=backend,
                            **{k: v for k, v in options.items() if k != "url"}))
                    line.append(f"{name} {images_s:.0f} images/s raw ({mb_s:.0f} MB/s)"
                                + ("" if args.no_loader else f", loader {rows[(name, 'loader')][-1]:.0f}"))
                print(f"round {round_index + 1}: " + " | ".join(line), flush=True)
        shutil.rmtree(tmp / "weed", ignore_errors=True)
    med = {k: statistics.median(v) if v else float("nan") for k, v in rows.items()}
    machine = provenance.machine()
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, load {os.getloadavg()[0]:.1f})"
    for name in backends:
        print(f"{name:>8}: raw {med[(name, 'raw')]:.0f} images/s ({med[(name, 'raw_mb_s')]:.0f} MB/s, "
              f"{med[(name, 'raw')] / med[('local', 'raw')]:.3f} of local); loader {med[(name, 'loader')]:.0f} "
              f"images/s ({med[(name, 'loader')] / med[('local', 'loader')]:.3f} of local)")
    results = HERE / "RESULTS.md"
    text = results.read_text()
    if HEADER not in text:
        text += HEADER
    when, dataset = provenance.utc_now(), f"{args.count} JPEGs, crop {IMAGE_SIZE}"
    for n in backends:
        text += (f"| {when} | {where} | {dataset} | {args.rounds} | {n} | {med[(n, 'raw')]:.0f} | "
                 f"{med[(n, 'raw_mb_s')]:.0f} | {med[(n, 'raw')] / med[('local', 'raw')]:.3f} | "
                 f"{med[(n, 'loader')]:.0f} | {med[(n, 'loader')] / med[('local', 'loader')]:.2f} |\n")
    results.write_text(text)
    return 0


HEADER = ("\n## NFS beside local disk and S3 (benchmarks/storage_read.py; medians over interleaved rounds)\n\n"
          "Raw: every object read whole through harness.storage.backends, fresh connection per round. Loader: the input "
          "pipeline alone, 2 workers. nfs: NFS-Ganesha 4.3 (VFS) read through libnfs 4.0; s3: SeaweedFS; "
          "all on 127.0.0.1.\n\n"
          "| when (UTC) | machine | dataset | rounds | storage | raw images/s | raw MB/s | raw / local | "
          "loader images/s | loader / local |\n|---|---|---|---|---|---|---|---|---|---|\n")


if __name__ == "__main__":
    sys.exit(main())
