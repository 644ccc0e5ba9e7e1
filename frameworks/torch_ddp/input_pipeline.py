"""Real input for ResNet-50: JPEGs read from a storage backend through a torch DataLoader with workers,
decoded and augmented for real (random resized crop, horizontal flip), so the pipeline's CPU and I/O cost
is part of the measurement. torchvision is not used (not installable here): Pillow + numpy + torch.

Every rank reads its own shard of the dataset (samples rank, rank + world, ...), reshuffled each epoch.
"""

from __future__ import annotations

import io
import time
from typing import Any, Iterator

import numpy as np
import torch
from PIL import Image

from frameworks.image_input import AUGMENT, MEAN, STD, Shard, random_resized_crop  # shared by every framework
from harness import storage
from harness.spec import RunSpec

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
        return (to_tensor(image, rng.random() < AUGMENT.flip), sample["label"], len(data),
                self.verifier.verified - verified_before)


class Pipeline:
    """An endless stream of batches from a rank's shard, with the bookkeeping the data record needs."""

    def __init__(self, spec: RunSpec, rank: int, world: int):
        self.shard = Shard(spec, rank, world)  # the file list, sharding, cache folder, staging, verification
        self.store, self.cache_dir, self.staging_s = self.shard.store, self.shard.cache_dir, self.shard.staging_s
        samples = self.shard.samples
        self.dataset = ImageFiles(self.store, samples, self.shard.image_size, self.shard.verifier, spec.seed)
        workers = self.shard.loader_workers
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
        return self.shard.cached_objects()

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
        self.shard.fill_cache()

    def loader_only(self, batches: int) -> float:
        """Samples/s of the pipeline alone (no model): ``batches`` batches after the training window."""
        # a fresh pass: batches the workers prefetched during training would otherwise be counted for free
        self.dataset.epoch += 1
        self._iter = None
        t0 = time.perf_counter()
        for _ in range(batches):
            self.next()
        return batches * self.batch / (time.perf_counter() - t0)
