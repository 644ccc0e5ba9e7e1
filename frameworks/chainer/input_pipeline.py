"""Real input for the Chainer ResNet-50: a chainer.iterators.MultiprocessIterator over a
chainer.dataset.DatasetMixin that reads a rank's shard of JPEGs through the harness's Store (any
storage backend) and decodes and augments them with Pillow + NumPy, as the PyTorch DataLoader does
(frameworks.shared.image_input: the same shard, checks and augmentation). Batches are NCHW float32.

``loader_workers`` processes fetch each batch (Chainer's pool maps a batch's samples over them), with
two batches prefetched; 0 workers: a SerialIterator, reading in the training process when the step asks.
The pool's processes are forked from the MPI rank after MPI_Init; they never call MPI, and Open MPI's
shared-memory and TCP transports (what ChainerMN's naive communicator uses here) tolerate a fork whose
child leaves MPI alone (tests/runs/test_input_pipelines_run.py runs it on 2 ranks).

Import after ``frameworks.chainer.compat.import_chainer()``.
"""

from __future__ import annotations

import os
import time

import chainer
import numpy as np

from frameworks.shared.image_input import Shard, decode_augment
from harness.contract.spec import RunSpec
from harness.storage import backends as storage

PREFETCH_BATCHES = 2


class ImageFiles(chainer.dataset.DatasetMixin):
    """One example per JPEG object: (image CHW float32, label int32, bytes read, checked 0/1, error).

    A StorageError is returned as the example's ``error`` (a string) rather than raised: raised in a
    pool process it would end Chainer's prefetch thread and leave the training loop waiting forever;
    :meth:`Pipeline.next` raises it in the training process instead.
    """

    def __init__(self, shard: Shard, seed: int):
        self.shard, self.seed = shard, seed
        self._rng: np.random.Generator | None = None
        self._rng_pid: int | None = None

    def __len__(self) -> int:
        return len(self.shard)

    def rng(self) -> np.random.Generator:
        # one generator per process: Chainer hands get_example no epoch, and each pool process holds its
        # own copy of the dataset, so the draws are seeded by (seed, process) and go on from call to call
        # (new crops every epoch; which process serves which sample is up to the pool)
        if self._rng is None or self._rng_pid != os.getpid():
            self._rng, self._rng_pid = np.random.default_rng([self.seed, os.getpid()]), os.getpid()
        return self._rng

    def get_example(self, i: int):
        size = self.shard.image_size
        try:
            data, checked = self.shard.read(i)
        except storage.StorageError as exc:
            return np.zeros((3, size, size), np.float32), np.int32(-1), 0, 0, str(exc)
        pixels = decode_augment(data, size, self.rng())
        return (np.ascontiguousarray(pixels.transpose(2, 0, 1)), np.int32(self.shard.samples[i]["label"]),
                len(data), checked, None)


class Pipeline:
    """An endless stream of (images NCHW, labels) batches from a rank's shard, with the counts the
    ``data`` record needs (bytes, objects and checks of the batches the training loop consumed)."""

    def __init__(self, spec: RunSpec, rank: int, world: int):
        self.shard = Shard(spec, rank, world)
        self.staging_s = self.shard.staging_s
        self.batch = spec.batch_per_worker
        self.dataset = ImageFiles(self.shard, spec.seed * 1000 + rank)
        order = chainer.iterators.ShuffleOrderSampler(np.random.RandomState(spec.seed * 1000 + rank))
        workers = self.shard.loader_workers
        if workers > 0:
            self.iterator = chainer.iterators.MultiprocessIterator(
                self.dataset, self.batch, repeat=True, n_processes=workers, n_prefetch=PREFETCH_BATCHES,
                order_sampler=order)
        else:
            self.iterator = chainer.iterators.SerialIterator(self.dataset, self.batch, repeat=True,
                                                             order_sampler=order)
        self.bytes_read = 0
        self.objects_read = 0
        self.verified = 0

    def cached_objects(self) -> int | None:
        return self.shard.cached_objects()

    def fill_cache(self) -> None:
        self.shard.fill_cache()

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        examples = self.iterator.next()  # repeat=True: a batch may run into the next epoch, always full
        errors = [e[4] for e in examples if e[4]]
        if errors:
            raise storage.StorageError(errors[0])
        self.bytes_read += sum(e[2] for e in examples)
        self.objects_read += len(examples)
        self.verified += sum(e[3] for e in examples)
        return np.stack([e[0] for e in examples]), np.array([e[1] for e in examples], np.int32)

    def loader_only(self, batches: int) -> float:
        """Samples/s of the pipeline alone (no model): ``batches`` batches after the training window."""
        self.iterator.reset()  # a fresh pass: batches prefetched during training would be counted for free
        t0 = time.perf_counter()
        for _ in range(batches):
            self.next()
        return batches * self.batch / (time.perf_counter() - t0)

    def close(self) -> None:
        """Stop the iterator's pool processes and prefetch thread."""
        self.iterator.finalize()
