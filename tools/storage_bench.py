"""Run scenarios/storage.toml on this machine: generate the datasets (JPEG files and tar shards; BERT
partitions for scenarios/storage_layouts.toml), start SeaweedFS (S3, port 18333),
Azurite (Blob, port 18334) and NFS-Ganesha (NFSv4, port 18335, exporting the dataset folder as it is)
on 127.0.0.1, upload the dataset to S3 and Blob, run the scenario, stop them.

    python tools/storage_bench.py [--count 1000] [--results results] [--scenario scenarios/storage_layouts.toml]

The S3 credentials are made up here and handed to the server and the workers through the environment;
Azurite's account key is its public development key.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
from pathlib import Path

from harness.cli import main as cli
from harness.storage import backends as storage, datagen
from testbed import servers as storage_servers

ROOT = Path("/tmp/rosetta-storage-bench")  # where scenarios/storage.toml expects the data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="images in the dataset")
    parser.add_argument("--results", default="results")
    parser.add_argument("--scenario", default="scenarios/storage.toml")
    args = parser.parse_args()
    data, text = ROOT / "imagenet", ROOT / "bert"
    if (data / datagen.MANIFEST).exists() and not datagen.read_manifest(
            (data / datagen.MANIFEST).read_text(), str(data / datagen.MANIFEST))["shards"]:
        shutil.rmtree(data)  # made by an earlier version of this tool, files only: make it again with shards
    if not (data / datagen.MANIFEST).exists():
        print(f"generating {args.count} JPEGs in {data} (files and tar shards)")
        datagen.make(datagen.parse_spec({"count": args.count, "layout": "both"}, "storage_bench"), data)
    if not (text / datagen.MANIFEST).exists():  # scenarios/storage_layouts.toml's BERT partitions
        print(f"generating BERT partitions in {text}")
        datagen.make(datagen.parse_spec({"kind": "bert", "partitions": 8, "partition_samples": 4096},
                                        "storage_bench"), text)
    key, secret = "rosetta-bench", secrets.token_hex(16)
    os.environ.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
    with storage_servers.seaweedfs(ROOT / "weed", key, secret, s3_port=18333) as s3_url, \
            storage_servers.azurite(ROOT / "azurite", port=18334) as blob_conn, \
            storage_servers.nfs_ganesha(data, ROOT / "ganesha", port=18335):
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = blob_conn
        s3 = {"url": "s3://rosetta/imagenet", "endpoint_url": s3_url}
        for backend, options in (("s3", s3), ("blob", {"url": "abfs://rosetta/imagenet"})):
            try:
                storage.Store(backend, options).fs.mkdir("rosetta")
            except FileExistsError:  # SeaweedFS keeps its data between runs
                pass
        for backend, options in (("s3", s3), ("blob", {"url": "abfs://rosetta/imagenet"})):
            print(f"uploading to {backend}: {storage.upload(data, backend, options) / 1e6:.1f} MB")
        print(f"uploading BERT partitions to s3: "
              f"{storage.upload(text, 's3', {**s3, 'url': 's3://rosetta/bert'}) / 1e6:.1f} MB")
        return cli.main(["run", args.scenario, "--results", args.results])


if __name__ == "__main__":
    sys.exit(main())
