"""``rosetta data make``: real datasets for the storage axis, each with a versioned manifest.

``kind = "imagenet"``: an ImageNet-shaped dataset of real JPEG files. Layout under the output folder
(both layouts hold the same samples, since the layout changes how storage behaves: many small objects
vs few large sequential reads)::

    files/train/<class>/<key>.jpg      one file per sample, ImageNet's class-folder layout
    shards/train-000000.tar            WebDataset-style tar shards: <key>.jpg + <key>.cls members
    manifest.json                      format, kind, the data spec, and sha256 + size of every object

``kind = "bert"``: pre-tokenized BERT pre-training sequences in partitions (harness.storage.textdata)::

    bert/part-00000.npy                one partition: packed records (token, segment and mask arrays)
    manifest.json                      as above; ``partitions`` lists each one's path, records, size, sha256

Everything is deterministic from the spec's seed: the same spec gives byte-identical files.
Pillow is imported here only (the harness's other modules never need it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from harness.base import config
from harness.base.config import Where
from harness.base.errors import UserError

MANIFEST_FORMAT = 2  # 2: adds kind, shards (imagenet) and partitions (bert); format 1 is still read
READABLE_FORMATS = (1, 2)
MANIFEST = "manifest.json"
LAYOUTS = ("files", "shards", "both")
KINDS = ("imagenet", "bert")


@dataclass(frozen=True)
class DataSpec:
    """What ``rosetta data make`` generates. Sizes in KB are 1000 bytes. ``count`` .. ``quality`` are
    imagenet's, ``partitions`` .. ``max_predictions`` bert's (the other kind's keys are ignored)."""

    kind: str = field(default="imagenet", metadata={"choices": KINDS})
    count: int = field(default=512, metadata={"min": 1})  # samples
    classes: int = field(default=10, metadata={"min": 1, "max": 1000})
    seed: int = field(default=0, metadata={"min": 0})
    min_kb: int = field(default=50, metadata={"min": 2})  # smallest JPEG aimed at (KB)
    max_kb: int = field(default=200, metadata={"min": 2})  # largest JPEG aimed at (KB); ImageNet: 50-200
    layout: str = field(default="both", metadata={"choices": LAYOUTS})
    shard_samples: int = field(default=256, metadata={"min": 1})  # samples per tar shard
    quality: int = field(default=90, metadata={"min": 10, "max": 100})  # JPEG quality
    partitions: int = field(default=4, metadata={"min": 1})  # bert: partition files (published: 100)
    # bert: sequences per partition; 889 bytes each at seq_len 128: 2,000,000 is the published 1.8 GB
    partition_samples: int = field(default=1024, metadata={"min": 1})
    seq_len: int = field(default=128, metadata={"min": 8, "max": 32767})  # bert: tokens per sequence
    vocab_size: int = field(default=30522, metadata={"min": 1024})  # bert: as the workload's (BERT uncased)
    max_predictions: int = field(default=20, metadata={"min": 1})  # bert: masked positions per sequence at most


def parse_spec(table: Mapping[str, Any], file: str) -> DataSpec:
    """A data spec from a TOML table (or flags gathered into one); mistakes are one-line UserErrors."""
    where = Where(file)
    spec = config.build(DataSpec, table, where)
    if spec.min_kb > spec.max_kb:
        raise where.error("min_kb", f"must be <= max_kb ({spec.max_kb}), got {spec.min_kb}")
    if spec.max_predictions > spec.seq_len - 3:
        raise where.error("max_predictions", f"must be <= seq_len - 3 ({spec.seq_len - 3}), got {spec.max_predictions}")
    return spec


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# Bytes per pixel of the generated texture at quality 90, measured once (Pillow 11-13); the target
# size of each image sets its pixel count through it, so the size spread follows the target spread.
_BYTES_PER_PIXEL: dict[int, float] = {}


def _bytes_per_pixel(quality: int) -> float:
    if quality not in _BYTES_PER_PIXEL:
        probe = _encode(_texture(np.random.default_rng(12345), 256, 256), quality)
        _BYTES_PER_PIXEL[quality] = len(probe) / (256 * 256)
    return _BYTES_PER_PIXEL[quality]


def _texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """An RGB image with smooth colour gradients plus fine noise: costs a real JPEG decode,
    compresses like a photograph rather than like a flat colour."""
    y = np.linspace(0, 1, height, dtype=np.float32)[:, None, None]
    x = np.linspace(0, 1, width, dtype=np.float32)[None, :, None]
    base = rng.uniform(0, 255, 3).astype(np.float32)
    slope = rng.uniform(-120, 120, (2, 3)).astype(np.float32)
    image = base + slope[0] * y + slope[1] * x + rng.normal(0, 40, (height, width, 3)).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def _encode(pixels: np.ndarray, quality: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format="JPEG", quality=quality)
    return out.getvalue()


def make_jpeg(spec: DataSpec, index: int) -> tuple[bytes, int]:
    """Sample ``index``: its JPEG bytes and class label; depends only on (seed, index)."""
    rng = np.random.default_rng([spec.seed, index])
    label = int(rng.integers(spec.classes))
    # log-uniform target size: ImageNet's sizes are skewed towards the small end
    target = np.exp(rng.uniform(np.log(spec.min_kb * 1000), np.log(spec.max_kb * 1000)))
    pixels = target / _bytes_per_pixel(spec.quality)
    aspect = rng.uniform(0.75, 1.33)  # width / height, like photographs
    height = max(16, int(round(np.sqrt(pixels / aspect))))
    width = max(16, int(round(height * aspect)))
    return _encode(_texture(rng, height, width), spec.quality), label


def class_name(label: int) -> str:
    return f"n{label:08d}"  # WordNet-id-like folder names, as in ImageNet


def sample_key(index: int) -> str:
    return f"{index:08d}"


def total_samples(spec: DataSpec) -> int:
    return spec.partitions * spec.partition_samples if spec.kind == "bert" else spec.count


def partition_path(index: int) -> str:
    return f"bert/part-{index:05d}.npy"


def empty_folder(out: Path) -> Path:
    """``out`` as a new or empty folder (made), else a one-line :class:`UserError`: a file, a folder with
    files, a file where one of its folders should be."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: is a file; `rosetta data make` writes into a new or empty folder")
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out}: not empty; `rosetta data make` writes into a new or empty folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{out}: cannot make the folder ({exc.strerror or type(exc).__name__})") from None
    return out


def make(spec: DataSpec, out: Path, progress=None) -> dict[str, Any]:
    """Generate the dataset into ``out`` (which must be empty or absent); returns the manifest.
    ``progress(done)`` is called with the samples written so far."""
    out = empty_folder(out)
    if spec.kind == "bert":
        return _make_bert(spec, out, progress)
    files: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    shards: list[dict[str, Any]] = []
    tar: tarfile.TarFile | None = None
    shard_path: Path | None = None

    def close_shard() -> None:
        nonlocal tar
        if tar is not None:
            members = len(tar.getmembers())
            tar.close()
            data = shard_path.read_bytes()
            shards.append({"path": shard_path.relative_to(out).as_posix(), "bytes": len(data),
                           "sha256": sha256_bytes(data), "samples": members // 2})
            tar = None

    for i in range(spec.count):
        jpeg, label = make_jpeg(spec, i)
        key = sample_key(i)
        rel = f"files/train/{class_name(label)}/{key}.jpg"
        samples.append({"key": key, "label": label, "file": rel, "bytes": len(jpeg), "sha256": sha256_bytes(jpeg)})
        if spec.layout in ("files", "both"):
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(jpeg)
            files.append({"path": rel, "bytes": len(jpeg), "sha256": samples[-1]["sha256"]})
        if spec.layout in ("shards", "both"):
            if i % spec.shard_samples == 0:
                close_shard()
                shard_path = out / "shards" / f"train-{i // spec.shard_samples:06d}.tar"
                shard_path.parent.mkdir(parents=True, exist_ok=True)
                tar = tarfile.open(shard_path, "w", format=tarfile.USTAR_FORMAT)
            for name, payload in ((f"{key}.jpg", jpeg), (f"{key}.cls", str(label).encode())):
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(payload), 0, 0o644  # mtime 0: byte-identical reruns
                tar.addfile(info, io.BytesIO(payload))
            samples[-1]["shard"] = len(shards)
        if progress:
            progress(i + 1)
    close_shard()
    objects = files + [{k: s[k] for k in ("path", "bytes", "sha256")} for s in shards]
    manifest = {"format": MANIFEST_FORMAT, "kind": spec.kind, "spec": dataclasses.asdict(spec), "samples": samples,
                "shards": shards, "objects": objects, "total_bytes": sum(s["bytes"] for s in samples)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def _make_bert(spec: DataSpec, out: Path, progress=None) -> dict[str, Any]:
    """Partition files, each hashed as it is written (a 1.8 GB partition is never held in memory)."""
    from harness.storage import textdata

    partitions = []
    for index in range(spec.partitions):
        rel = partition_path(index)
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as raw:
            hashing = _HashingWriter(raw)
            textdata.write_partition(hashing, spec.partition_samples, spec.seq_len, spec.max_predictions,
                                     spec.vocab_size, spec.seed, index)
        partitions.append({"path": rel, "samples": spec.partition_samples, "bytes": hashing.size,
                           "sha256": hashing.digest.hexdigest()})
        if progress:
            progress((index + 1) * spec.partition_samples)
    manifest = {"format": MANIFEST_FORMAT, "kind": spec.kind, "spec": dataclasses.asdict(spec),
                "partitions": partitions, "objects": [{k: p[k] for k in ("path", "bytes", "sha256")} for p in partitions],
                "total_bytes": sum(p["bytes"] for p in partitions)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


class _HashingWriter:
    """A binary file that hashes and counts what is written through it."""

    def __init__(self, raw):
        self.raw, self.digest, self.size = raw, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.raw.write(data)


def read_manifest(text: str | bytes, where: str) -> dict[str, Any]:
    """Parse a manifest; an unknown format is a UserError naming where it came from."""
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where}: not a JSON manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise UserError(f"{where}: manifest format {found!r}, this harness reads "
                        f"{', '.join(map(str, READABLE_FORMATS))}")
    if manifest["format"] == 1:  # format 1: images only, shards found among the objects
        manifest = {**manifest, "kind": "imagenet",
                    "shards": [o for o in manifest["objects"] if o["path"].startswith("shards/")]}
    if manifest.get("kind") not in KINDS:
        raise UserError(f"{where}: manifest kind {manifest.get('kind')!r}, known: {', '.join(KINDS)}")
    return manifest
