"""Real input from storage, the parts every framework's input path shares (no deep-learning import here).

- :class:`Shard`: a rank's share of a ``rosetta data make`` dataset on a storage backend: the objects
  (JPEG files, tar shards or BERT partitions) ``rank, rank + world, ...`` of the manifest, one cache
  folder per rank (emptied for a cold
  ``cached`` run), the optional copy-to-local staging, and the sampled sha256 verification of reads.
- :data:`AUGMENT`: the augmentation's parameters (Inception-style random resized crop, left-right flip),
  one constant for the PyTorch DataLoader, tf.data and the Chainer iterator; :func:`crop_box` samples a
  crop as torchvision's RandomResizedCrop does, :func:`decode_augment` is the Pillow + NumPy decode and
  augment PyTorch and Chainer run (tf.data runs the same sampling in TensorFlow ops).
- :class:`StallMeter`: the time each step waited for its batch, and the run's ``data`` record
  (harness.running.collect.data_fields makes the row's data_stall_frac, read_mb_s, loader_throughput, ... of it).

A framework's pipeline object offers ``bytes_read``, ``objects_read``, ``verified`` (counts of what the
training loop consumed), ``staging_s``, ``cached_objects()`` and ``loader_only(batches)`` (samples/s).
"""

from __future__ import annotations

import copy
import io
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from harness.contract.axes import Storage, Workload
from harness.contract.spec import RunSpec
from harness.storage import backends as storage, cache_tier, datagen


@dataclass(frozen=True)
class Augmentation:
    """Random resized crop (Szegedy et al. 2015; torchvision's RandomResizedCrop) then a left-right flip."""

    scale: tuple[float, float] = (0.08, 1.0)  # crop area as a fraction of the image's, sampled uniformly
    ratio: tuple[float, float] = (3 / 4, 4 / 3)  # crop aspect (width / height), sampled log-uniformly
    flip: float = 0.5  # probability of mirroring left-right
    attempts: int = 10  # crops tried before falling back to the centred square


AUGMENT = Augmentation()
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32) * 255  # ImageNet channel means (0-255 scale)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32) * 255


def crop_box(width: int, height: int, rng: np.random.Generator,
             scale: tuple[float, float] = AUGMENT.scale, ratio: tuple[float, float] = AUGMENT.ratio,
             attempts: int = AUGMENT.attempts) -> tuple[int, int, int, int]:
    """(left, top, crop width, crop height) in pixels: a random area fraction and aspect that fit,
    else the centred square after ``attempts`` tries (torchvision's RandomResizedCrop.get_params)."""
    area = width * height
    for _ in range(attempts):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1)), w, h
    side = min(width, height)
    return (width - side) // 2, (height - side) // 2, side, side


def random_resized_crop(image, size: int, rng: np.random.Generator,
                        scale: tuple[float, float] = AUGMENT.scale, ratio: tuple[float, float] = AUGMENT.ratio):
    """A Pillow image's random crop (:func:`crop_box`) resized to ``size`` x ``size`` (bilinear)."""
    from PIL import Image

    left, top, w, h = crop_box(image.size[0], image.size[1], rng, scale, ratio)
    return image.resize((size, size), Image.BILINEAR, box=(left, top, left + w, top + h))


def decode_augment(data: bytes, size: int, rng: np.random.Generator) -> np.ndarray:
    """JPEG bytes -> a random resized crop, flipped with probability AUGMENT.flip, normalized:
    float32 (size, size, 3), channels last (HWC)."""
    from PIL import Image

    image = random_resized_crop(Image.open(io.BytesIO(data)).convert("RGB"), size, rng)
    pixels = np.asarray(image, dtype=np.float32)
    if rng.random() < AUGMENT.flip:
        pixels = pixels[:, ::-1]
    return (pixels - MEAN) / STD


class Shard:
    """This rank's share of the dataset a run's storage options point at, and how to read it.

    The share is a list of objects, ``rank, rank + world, ...`` of the manifest's: JPEG files
    (``layout = "files"``, what every framework reads), tar shards (``layout = "shards"``) or BERT token
    partitions (a ``--kind bert`` dataset); the PyTorch pipelines read the last two. Reading goes
    through the harness's Store (fsspec); a sampled share of objects (``verify_fraction``) is checked
    against the manifest's sha256, and wrong bytes, a missing object or a server that is down raise
    :class:`harness.storage.backends.StorageError` naming the backend and object.
    Picklable (the Store opens its file system lazily, per process).
    """

    def __init__(self, spec: RunSpec, rank: int, world: int):
        options = dict(spec.storage_options)
        backend = spec.storage.value
        self.cache_dir: Path | None = None
        if spec.storage in (Storage.CACHED, Storage.CACHED_WARM):
            self.cache_dir = Path(options["cache_dir"]) / f"rank{rank}"  # one cache per rank: no writer races
            options["cache_dir"] = str(self.cache_dir)
            if spec.storage == Storage.CACHED:
                storage.clear_cache(self.cache_dir)  # cold: nothing cached when the run starts
        self.store = storage.Store(backend, options)
        where = self.store.url(datagen.MANIFEST)
        self.manifest = datagen.read_manifest(self.store.read(datagen.MANIFEST), where)
        self.kind = self.manifest["kind"]
        wanted = "bert" if spec.workload == Workload.BERT else "imagenet"
        if self.kind != wanted:
            raise storage.StorageError(f"storage {backend}: {where} is a dataset of kind {self.kind}; workload "
                                       f"{spec.workload.value} reads kind {wanted} (rosetta data make DIR --kind "
                                       f"{wanted})")
        self.layout = storage.Layout(options.get("layout") or storage.Layout.FILES)  # an Enum in process, a str in a spec
        if self.kind == "bert":
            _check_text_matches(self.manifest["spec"], spec, backend, where)
            self.unit_name, key = "partitions", "path"
        elif self.layout == storage.Layout.SHARDS:
            self.unit_name, key = "shards", "path"
        else:
            self.unit_name, key = "samples", "file"
        units = self.manifest[self.unit_name]
        self.units: list[dict[str, Any]] = units[rank::world]  # every rank its own
        if not self.units:
            raise storage.StorageError(f"storage {backend}: the dataset at {where} has {len(units)} {self.unit_name}, "
                                       f"fewer than the {world} ranks"
                                       + (" (tar shards: rosetta data make --layout shards or both)"
                                          if self.unit_name == "shards" and not units else ""))
        self.objects: list[str] = [u[key] for u in self.units]
        self.staging_s: float | None = None
        if options.get("stage_dir"):  # copy-to-local: fetch this rank's objects first, then read locally
            stage = Path(options["stage_dir"]) / f"rank{rank}"
            self.staging_s = storage.copy_to_local(self.store, self.objects, stage)
            self.store = storage.Store("local", {"url": str(stage)})
        self.verifier = storage.Verifier({rel: u["sha256"] for rel, u in zip(self.objects, self.units)},
                                         float(options["verify_fraction"]), seed=spec.seed)
        self.loader_workers = int(options["loader_workers"])
        self.image_size = int(spec.workload_options.get("image_size", 0))  # 0 for bert
        self._threads = threading.local()

    def __getstate__(self):
        return {**self.__dict__, "_threads": None}

    def __setstate__(self, state):
        self.__dict__.update(state, _threads=threading.local())

    def thread_store(self) -> storage.Store:
        """The calling thread's Store: not every file-system client is documented thread-safe (harness.storage.nfs_fs:
        one libnfs context is not; its SWIG calls hold the GIL, which serializes them in practice, but
        nothing promises it), so each loader thread (tf.data's) opens its own, as each loader process does."""
        if threading.current_thread() is threading.main_thread():
            return self.store
        store = getattr(self._threads, "store", None)
        if store is None:
            store = self._threads.store = copy.copy(self.store)  # unopened: it opens its file system on first read
        return store

    def __len__(self) -> int:
        return len(self.units)

    @property
    def samples(self) -> list[dict[str, Any]]:
        """The share's JPEG files (``layout = "files"``): file, label, sha256 of each."""
        if self.unit_name != "samples":
            raise ValueError(f"this share holds {self.unit_name}, not image files")
        return self.units

    @property
    def labels(self) -> list[int]:
        return [int(s["label"]) for s in self.samples]

    def read(self, index: int) -> tuple[bytes, int]:
        """Sample ``index``'s bytes and whether they were checked against the manifest (1) or not (0).

        Returns the check's count rather than relying on ``Verifier.verified``: in loader processes
        that counter lives in another process, in loader threads another read may move it meanwhile."""
        rel = self.objects[index]
        store = self.thread_store()
        data = store.read(rel)
        checked = rel in self.verifier.expected
        self.verifier.check(store, rel, data)  # wrong bytes raise: the run fails, naming both
        return data, int(checked)

    def cached_objects(self) -> int | None:
        """Objects in this rank's cache folder (``cached``, ``cached_warm``), else None."""
        if self.cache_dir is None:
            return None
        return sum(1 for p in self.cache_dir.iterdir() if p.name != "cache") if self.cache_dir.exists() else 0

    def fill_cache(self) -> None:
        """cached_warm: read every object of the share once (untimed), so the window runs warm."""
        for rel in self.objects:
            self.store.drain(rel)


class StallMeter:
    """Seconds each step waited for its batch, and the ``data`` record of the measured window."""

    def __init__(self, pipeline: Any):
        self.pipeline = pipeline
        self.waits: list[float] = []
        self.at_window: dict[str, Any] = {}

    def next_batch(self, fetch: Callable[[], Any]) -> Any:
        """``fetch()``'s batch, its wait timed (the batch must be usable when fetch returns)."""
        t0 = time.perf_counter()
        batch = fetch()
        self.waits.append(time.perf_counter() - t0)
        return batch

    def between_steps(self, warmup_steps: int) -> Callable[[int], None]:
        """For run_measured_loop: note the pipeline's counters when the measured window starts."""

        def note(done: int) -> None:
            if done == warmup_steps:
                p = self.pipeline
                self.at_window.update(bytes=p.bytes_read, objects=p.objects_read, cached=p.cached_objects(),
                                      waits=len(self.waits), tier=self._tier_counters(),
                                      partitions=len(getattr(p, "partition_loads", None) or ()))
        if warmup_steps == 0:
            note(0)
        return note

    def _tier_counters(self) -> tuple[float, float] | None:
        """The cache tier's (hit, miss) bytes from its metrics, if the backend names them (juicefs)."""
        url = self.pipeline.shard.store.options.get("metrics_url")
        return cache_tier.block_cache_bytes(url) if url else None

    def record(self, window: dict[str, float], loader_batches: int) -> dict[str, Any]:
        """Wait, bytes and objects in the window, cache misses (new objects in the cache), then a
        loader-only pass (no model) of ``loader_batches`` batches, after the window so it never
        competes with training (for ``cached`` it runs over a warmer cache). A BERT pipeline's record also
        lists ``partitions``: each partition whose last byte arrived with a batch of the window (path,
        bytes, seconds reading, span_s open to last byte; frameworks/shared/pytorch/text_pipeline.py)."""
        p, at = self.pipeline, self.at_window
        cached_after = p.cached_objects()
        out = {"data_wait_s": sum(self.waits[at["waits"]:]), "window_s": window["seconds"],
               "bytes_read": p.bytes_read - at["bytes"], "objects_read": p.objects_read - at["objects"],
               "cache_misses": None if cached_after is None else max(0, cached_after - at["cached"]),
               "staging_s": p.staging_s}
        tier = self._tier_counters()
        if tier is not None:  # the cache tier's own hit and miss bytes in the window (every client's)
            out["tier_hit_bytes"] = tier[0] - at["tier"][0]
            out["tier_miss_bytes"] = tier[1] - at["tier"][1]
        loads = getattr(p, "partition_loads", None)  # BERT's partitions (torch's pipeline), before the loader-only pass
        if loads is not None:
            out["partitions"] = loads[at["partitions"]:]
        out["loader_samples_s"] = p.loader_only(loader_batches)
        out["objects_verified"] = p.verified
        return out


def unsupported(spec: RunSpec, framework: str) -> str | None:
    """Why ``framework``'s worker cannot read this run's real data (it reads ResNet-50 images as JPEG
    files), or None."""
    if spec.storage == Storage.SYNTHETIC:
        return None
    if spec.workload != Workload.RESNET50:
        return (f"storage {spec.storage.value}: {framework} reads real data for resnet50 images only, "
                f"not for {spec.workload.value}")
    if (spec.storage_options.get("layout") or storage.Layout.FILES) != storage.Layout.FILES:
        return f"storage {spec.storage.value}: {framework} reads image files, not the tar-shard layout"
    return None


def _check_text_matches(data: dict[str, Any], spec: RunSpec, backend: str, where: str) -> None:
    """A partition's sequences must fit the model: the same length, ids inside its vocabulary."""
    seq_len, vocab = int(spec.workload_options["seq_len"]), int(spec.workload_options["vocab_size"])
    if int(data["seq_len"]) != seq_len or int(data["vocab_size"]) > vocab:
        raise storage.StorageError(
            f"storage {backend}: {where} holds sequences of {data['seq_len']} tokens (vocab {data['vocab_size']}); "
            f"bert {spec.size.value} needs seq_len {seq_len}, vocab <= {vocab} "
            f"(rosetta data make DIR --kind bert --seq-len {seq_len})")
