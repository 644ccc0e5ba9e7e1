"""``rosetta data make``: real datasets for the storage axis (harness.storage.datagen)."""

from __future__ import annotations

import argparse
from pathlib import Path

_DATA_INT_FLAGS = ("count", "classes", "seed", "min_kb", "max_kb", "shard_samples", "quality",
                   "partitions", "partition_samples", "seq_len", "vocab_size", "max_predictions")


def add_parsers(sub) -> None:
    """``rosetta data make``: real datasets for the storage axis (harness.storage.datagen)."""
    data = sub.add_parser("data", help="generate datasets for the storage backends")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    p = data_sub.add_parser("make", help="a dataset with a checksum manifest: real JPEGs (kind imagenet) or "
                                         "pre-tokenized BERT partitions (kind bert)")
    p.add_argument("out", type=Path, help="output folder (new or empty)")
    p.add_argument("--spec", type=Path, help="TOML data spec (keys as the flags); flags override it")
    p.add_argument("--kind", help="imagenet (JPEGs, default) | bert (token partitions)")
    for name in _DATA_INT_FLAGS:
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int)
    p.add_argument("--layout", help="imagenet: files | shards | both (default both)")
    p.set_defaults(handler=cmd_data_make)


def cmd_data_make(args: argparse.Namespace) -> None:
    from rich.progress import Progress

    from harness.base import config
    from harness.storage import datagen

    table = dict(config.read_toml(args.spec)) if args.spec else {}
    flags = {k: getattr(args, k) for k in (*_DATA_INT_FLAGS, "kind", "layout") if getattr(args, k) is not None}
    spec = datagen.parse_spec({**table, **flags}, str(args.spec or "flags"))
    total = datagen.total_samples(spec)
    datagen.empty_folder(args.out)  # before the progress bar: a file there is refused in one line
    with Progress() as progress:
        unit = "sequences" if spec.kind == "bert" else "JPEGs"
        task = progress.add_task(f"{total} {unit}", total=total)
        manifest = datagen.make(spec, args.out, lambda done: progress.update(task, completed=done))
    print(f"{args.out}: {total} samples, {manifest['total_bytes'] / 1e6:.1f} MB, "
          f"{len(manifest['objects'])} objects in {datagen.MANIFEST}")
