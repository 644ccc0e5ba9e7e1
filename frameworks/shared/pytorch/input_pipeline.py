"""Real input from a storage backend through a torch DataLoader with workers, for both workloads.

ResNet-50: JPEGs decoded and augmented for real (random resized crop, horizontal flip), so the pipeline's
CPU and I/O cost is part of the measurement; torchvision is not used (not installable here): Pillow +
numpy + torch. Two layouts (``layout`` in ``[storage_options.<backend>]``):
- ``files``: one object per JPEG; every rank reads its own samples (rank, rank + world, ...), reshuffled
  each epoch;
- ``shards``: WebDataset-style tar shards streamed with the tarfile module over the backend's file object
  (never downloaded whole); every rank reads its own shards, each loader worker its share of them, shard
  order reshuffled each pass and samples mixed through a shuffle buffer.
BERT: pre-tokenized partitions (frameworks/shared/pytorch/text_pipeline.py).

Every item carries its cost (bytes read, objects opened, objects whose checksum was verified) so the
main process can count what its loader workers did.
"""

from __future__ import annotations

import io
import tarfile
import time
from typing import Any, Iterator

import numpy as np
import torch
from PIL import Image

from frameworks.shared.image_input import (  # shared by every framework
    AUGMENT,
    MEAN,
    STD,
    Shard,
    random_resized_crop,
)
from frameworks.shared.pytorch.text_pipeline import (
    TokenPartitions,
    stats_tensor,
    worker_share,
)
from harness.contract.spec import RunSpec
from harness.storage import backends as storage


def to_tensor(image: Image.Image, flip: bool) -> torch.Tensor:
    """HWC uint8 -> normalized CHW float32, optionally mirrored left-right."""
    pixels = np.asarray(image, dtype=np.float32)
    if flip:
        pixels = pixels[:, ::-1]
    return torch.from_numpy(np.ascontiguousarray(((pixels - MEAN) / STD).transpose(2, 0, 1)))


class ImageFiles(torch.utils.data.Dataset):
    """One sample per JPEG object; returns (image tensor, label, stats: bytes, objects, verified)."""

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
        image = decode(self.store, sample["file"], data)
        image = random_resized_crop(image, self.image_size, rng)
        return (to_tensor(image, rng.random() < AUGMENT.flip), sample["label"],
                stats_tensor(len(data), 1, self.verifier.verified - verified_before))


def decode(store: storage.Store, rel: str, data: bytes) -> Image.Image:
    try:
        return Image.open(io.BytesIO(data)).convert("RGB")
    except Exception as exc:  # Pillow's errors for a damaged JPEG: name the object, not only the decoder
        raise storage.StorageError(f"storage {store.backend}: object {store.url(rel)} is not a decodable "
                                   f"image: {type(exc).__name__}: {exc}") from None


class ImageShards(torch.utils.data.IterableDataset):
    """An endless stream of (image tensor, label, stats) from a rank's tar shards, read as streams."""

    def __init__(self, store: storage.Store, shards: list[dict[str, Any]], image_size: int,
                 verifier: storage.Verifier, seed: int, rank: int, shuffle_buffer: int = 64):
        self.store, self.shards, self.image_size = store, shards, image_size
        self.verifier, self.seed, self.rank, self.shuffle_buffer = verifier, seed, rank, shuffle_buffer
        self.passes = 0  # iter() calls in this process: a persistent loader worker keeps counting

    def __iter__(self):
        mine, worker = worker_share(self.shards)
        self.passes += 1
        epoch = self.passes
        buffer: list[tuple] = []
        pending = stats_tensor(0, 0, 0)  # counted after a shard's last sample (its checksum, its tail)
        while mine:
            rng = np.random.default_rng([self.seed, self.rank, worker, epoch])
            for index in rng.permutation(len(mine)):
                for item in self._samples(mine[index]["path"]):
                    if item[0] is None:
                        pending = pending + item[3]
                        continue
                    buffer.append(item)
                    if len(buffer) >= self.shuffle_buffer:  # hand out a random one of the buffered samples,
                        name, jpeg, label, stats = buffer.pop(int(rng.integers(len(buffer))))  # decoded now:
                        image = random_resized_crop(decode(self.store, name, jpeg), self.image_size, rng)  # the
                        yield to_tensor(image, rng.random() < AUGMENT.flip), label, stats + pending  # buffer holds bytes
                        pending = stats_tensor(0, 0, 0)
            epoch += 1000  # the next epoch of this pass, distinct from later passes' epochs

    def _samples(self, rel: str):
        """(name, JPEG bytes, label, stats) of each sample of one shard (<key>.jpg + <key>.cls pairs),
        stats the bytes each one cost; decoding waits until a sample leaves the shuffle buffer."""
        with self.store.open(rel, digest=self.verifier.wants(rel)) as reader:
            seen, first, pending = 0, True, {}
            held = None  # the latest sample, handed out once the next arrives (the last one with the shard's
            #             tail: its end-of-archive bytes and checksum count travel with a sample of its own)
            try:
                with tarfile.open(fileobj=reader, mode="r|") as tar:  # "r|": a stream, no seeking back
                    for member in tar:
                        if not member.isfile():
                            continue
                        key, _, ext = member.name.rpartition(".")
                        pending.setdefault(key, {})[ext] = tar.extractfile(member).read()
                        if {"jpg", "cls"} <= pending[key].keys():
                            parts = pending.pop(key)
                            stats = stats_tensor(reader.size - seen, int(first), 0)
                            seen, first = reader.size, False
                            if held is not None:
                                yield held
                            held = (f"{rel}/{member.name}", parts["jpg"], int(parts["cls"]), stats)
                while reader.read(1 << 20):  # the end-of-archive padding tarfile leaves unread: hash it all
                    pass
            except (tarfile.TarError, ValueError, EOFError) as exc:
                raise storage.StorageError(f"storage {self.store.backend}: object {self.store.url(rel)} is not a "
                                           f"valid tar shard: {type(exc).__name__}: {exc}") from None
            if pending:
                raise storage.StorageError(f"storage {self.store.backend}: object {self.store.url(rel)}: samples "
                                           f"without both .jpg and .cls: {', '.join(sorted(pending)[:3])}")
            verified = 0
            if reader.hash is not None:
                self.verifier.check_digest(self.store, rel, reader.hash.hexdigest(), reader.size)
                verified = 1
            tail = stats_tensor(reader.size - seen, 0, verified)
            yield (None, None, None, tail) if held is None else (*held[:3], held[3] + tail)


class Pipeline:
    """An endless stream of batches from a rank's share of the dataset, with the bookkeeping the data
    record needs. :meth:`next_batch` gives the model's inputs for either workload."""

    def __init__(self, spec: RunSpec, rank: int, world: int):
        self.shard = Shard(spec, rank, world)  # the objects, cache folder, staging, verification
        self.store, self.staging_s, self.kind = self.shard.store, self.shard.staging_s, self.shard.kind
        mine, unit_name, verifier = self.shard.units, self.shard.unit_name, self.shard.verifier
        workers = self.shard.loader_workers
        self.batch = spec.batch_per_worker
        generator = torch.Generator().manual_seed(spec.seed * 1000 + rank)
        if unit_name == "samples":
            self.dataset = ImageFiles(self.store, mine, self.shard.image_size, verifier, spec.seed)
            loader_args = dict(batch_size=self.batch, shuffle=True, drop_last=len(mine) >= self.batch,
                               generator=generator)
        else:
            workers = min(workers, len(mine))  # a worker without an object of its own would idle
            if unit_name == "shards":
                self.dataset = ImageShards(self.store, mine, self.shard.image_size, verifier, spec.seed, rank)
                loader_args = dict(batch_size=self.batch)
            else:
                self.dataset = TokenPartitions(self.store, mine, self.batch, self.shard.manifest["spec"], verifier,
                                               spec.seed, rank)
                loader_args = dict(batch_size=None)  # the dataset batches: whole record blocks at a time
        self.loader = torch.utils.data.DataLoader(
            self.dataset, num_workers=workers, persistent_workers=workers > 0,
            prefetch_factor=2 if workers else None, **loader_args)
        self._iter: Iterator | None = None
        self.bytes_read = 0
        self.objects_read = 0
        self.verified = 0
        # BERT: each partition read to its end (path, bytes, seconds, span_s), in the order they arrived
        self.partition_loads: list[dict[str, Any]] | None = [] if self.kind == "bert" else None

    def cached_objects(self) -> int | None:
        return self.shard.cached_objects()

    def next_batch(self) -> dict[str, torch.Tensor]:
        """The model's next batch (the keys of the workload's synthetic batch), on the CPU."""
        while True:
            if self._iter is None:
                self._iter = iter(self.loader)
            try:
                item = next(self._iter)
                break
            except StopIteration:  # next epoch (files): a new shuffle and new augmentations
                if hasattr(self.dataset, "epoch"):
                    self.dataset.epoch += 1
                self._iter = None
            except storage.StorageError as exc:  # from a loader worker, wrapped with its traceback: keep the
                last = str(exc).strip().splitlines()[-1]  # one line that names the backend and the object
                raise storage.StorageError(last.split("StorageError: ", 1)[-1]) from None
        if self.kind == "bert":
            batch, stats, loads = item
            self.partition_loads.extend(loads)
        else:
            images, labels, stats = item
            batch = {"images": images, "labels": labels}
        bytes_read, objects, verified = (int(v) for v in stats.reshape(-1, 3).sum(0))
        self.bytes_read += bytes_read  # read in the loader workers, counted here as their batches arrive
        self.objects_read += objects
        self.verified += verified
        return batch

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """ResNet-50's (images, labels): the call every framework's pipeline answers (benchmarks/loader.py)."""
        batch = self.next_batch()
        return batch["images"], batch["labels"]

    def fill_cache(self) -> None:
        """cached_warm: read every object of the rank's share once (untimed), so the window runs warm."""
        self.shard.fill_cache()

    def loader_only(self, batches: int) -> float:
        """Samples/s of the pipeline alone (no model): ``batches`` batches after the training window."""
        # a fresh pass: batches the workers prefetched during training would otherwise be counted for free
        if hasattr(self.dataset, "epoch"):
            self.dataset.epoch += 1
        self._iter = None
        t0 = time.perf_counter()
        for _ in range(batches):
            self.next_batch()
        return batches * self.batch / (time.perf_counter() - t0)

