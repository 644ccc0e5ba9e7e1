"""Real input for ResNet-50: JPEGs read from a storage backend through a torch DataLoader with workers,
decoded and augmented for real (random resized crop, horizontal flip), so the pipeline's CPU and I/O cost
is part of the measurement. torchvision is not used (not installable here): Pillow + numpy + torch.

Every rank reads its own shard of the dataset (samples rank, rank + world, ...), reshuffled each epoch.
"""

from __future__ import annotations

import io
import math
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from PIL import Image

from harness import datagen, storage
from harness.axes import Storage
from harness.spec import RunSpec

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32) * 255  # ImageNet channel means (0-255 scale)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32) * 255


def random_resized_crop(image: Image.Image, size: int, rng: np.random.Generator,
                        scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) -> Image.Image:
    """Inception-style crop (as torchvision's RandomResizedCrop): a random area fraction and aspect,
    resized to ``size`` x ``size``; falls back to the centre crop after 10 tries."""
    width, height = image.size
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            left, top = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
            return image.resize((size, size), Image.BILINEAR, box=(left, top, left + w, top + h))
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    return image.resize((size, size), Image.BILINEAR, box=(left, top, left + side, top + side))


def to_tensor(image: Image.Image, flip: bool) -> torch.Tensor:
    """HWC uint8 -> normalized CHW float32, optionally mirrored left-right."""
    pixels = np.asarray(image, dtype=np.float32)
    if flip:
        pixels = pixels[:, ::-1]
    return torch.from_numpy(np.ascontiguousarray(((pixels - MEAN) / STD).transpose(2, 0, 1)))


class ImageFiles(torch.utils.data.Dataset):
    """One sample per JPEG object; returns (image tensor, label, bytes read)."""

    def __init__(self, store: storage.Store, samples: list[dict[str, Any]], image_size: int,
                 verifier: storage.Verifier, seed: int):
        self.store, self.samples, self.image_size = store, samples, image_size
        self.verifier, self.seed = verifier, seed
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        sample = self.samples[index]
        data = self.store.read(sample["file"])
        verified_before = self.verifier.verified
        self.verifier.check(self.store, sample["file"], data)  # wrong bytes raise: the run fails, naming both
        rng = np.random.default_rng([self.seed, self.epoch, index])
        image = Image.open(io.BytesIO(data)).convert("RGB")
        image = random_resized_crop(image, self.image_size, rng)
        return (to_tensor(image, bool(rng.integers(2))), sample["label"], len(data),
                self.verifier.verified - verified_before)


class Pipeline:
    """An endless stream of batches from a rank's shard, with the bookkeeping the data record needs."""

    def __init__(self, spec: RunSpec, rank: int, world: int):
        options = dict(spec.storage_options)
        backend = spec.storage.value
        self.cache_dir = None
        if spec.storage in (Storage.CACHED, Storage.CACHED_WARM):
            self.cache_dir = Path(options["cache_dir"]) / f"rank{rank}"  # one cache per rank: no writer races
            options["cache_dir"] = str(self.cache_dir)
            if spec.storage == Storage.CACHED:
                storage.clear_cache(self.cache_dir)  # cold: nothing cached when the run starts
        self.store = storage.Store(backend, options)
        manifest = datagen.read_manifest(self.store.read(datagen.MANIFEST), self.store.url(datagen.MANIFEST))
        samples = manifest["samples"][rank::world]
        if not samples:
            raise storage.StorageError(f"storage {backend}: the dataset has fewer samples than ranks ({world})")
        self.staging_s = None
        if options.get("stage_dir"):  # copy-to-local: fetch this rank's objects first, then read locally
            stage = Path(options["stage_dir"]) / f"rank{rank}"
            self.staging_s = storage.copy_to_local(self.store, [s["file"] for s in samples], stage)
            self.store = storage.Store("local", {"url": str(stage)})
        verifier = storage.Verifier({s["file"]: s["sha256"] for s in samples}, float(options["verify_fraction"]),
                                    seed=spec.seed)
        self.dataset = ImageFiles(self.store, samples, int(spec.workload_options["image_size"]), verifier, spec.seed)
        workers = int(options["loader_workers"])
        self.batch = spec.batch_per_worker
        self.loader = torch.utils.data.DataLoader(
            self.dataset, batch_size=self.batch, shuffle=True, drop_last=len(samples) >= self.batch,
            num_workers=workers, persistent_workers=workers > 0, prefetch_factor=2 if workers else None,
            generator=torch.Generator().manual_seed(spec.seed * 1000 + rank))
        self._iter: Iterator | None = None
        self.bytes_read = 0
        self.objects_read = 0
        self.verified = 0

    def cached_objects(self) -> int | None:
        if self.cache_dir is None:
            return None
        return sum(1 for p in self.cache_dir.iterdir() if p.name != "cache") if self.cache_dir.exists() else 0

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        while True:
            if self._iter is None:
                self._iter = iter(self.loader)
            try:
                images, labels, sizes, verified = next(self._iter)
                break
            except StopIteration:  # next epoch: a new shuffle and new augmentations
                self.dataset.epoch += 1
                self._iter = None
            except storage.StorageError as exc:  # from a loader worker, wrapped with its traceback: keep the
                last = str(exc).strip().splitlines()[-1]  # one line that names the backend and the object
                raise storage.StorageError(last.split("StorageError: ", 1)[-1]) from None
        self.bytes_read += int(sizes.sum())
        self.objects_read += len(sizes)
        self.verified += int(verified.sum())  # checked in the loader workers, counted here
        return images, labels

    def fill_cache(self) -> None:
        """cached_warm: read every object of the shard once (untimed), so the window runs warm."""
        for sample in self.dataset.samples:
            self.store.read(sample["file"])

    def loader_only(self, batches: int) -> float:
        """Samples/s of the pipeline alone (no model): ``batches`` batches after the training window."""
        # a fresh pass: batches the workers prefetched during training would otherwise be counted for free
        self.dataset.epoch += 1
        self._iter = None
        t0 = time.perf_counter()
        for _ in range(batches):
            self.next()
        return batches * self.batch / (time.perf_counter() - t0)
