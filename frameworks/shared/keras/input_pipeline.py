"""Real input for the Keras ResNet-50: a tf.data pipeline over a rank's shard of JPEGs on any storage backend.

TensorFlow's usual path, with the bytes read through the harness's Store (fsspec), so every backend the
PyTorch DataLoader reads (local, nfs, s3, blob, cached, cached_warm) reads here too:

    range(shard) -> shuffle (each epoch) -> repeat -> enumerate
      -> map(read through the Store in a tf.py_function + sampled sha256 check;
             tf.io.decode_and_crop_jpeg of a random resized crop; resize; flip; normalize),
         num_parallel_calls = loader_workers
      -> batch(drop_remainder) -> prefetch

The crop is sampled in TensorFlow ops with the shared parameters (frameworks.shared.image_input.AUGMENT) and
torchvision's algorithm (area uniform, aspect log-uniform, 10 tries, else the centred square), so the
three frameworks augment alike; tf.image.sample_distorted_bounding_box samples aspect uniformly and
falls back to the whole image. decode_and_crop_jpeg decodes only the crop's window (TensorFlow's fast
path). The resize is bilinear with antialiasing, as Pillow's. Output NHWC float32 (the models are
channels-last). The tf.data runtime gets ``loader_workers`` threads of its own and autotuning is off,
so the pipeline uses the CPU the setting says; ``loader_workers = 0`` reads one sample after the other
only when the step asks for a batch (sequential map, no prefetch), as a DataLoader without workers does.
"""

from __future__ import annotations

import math
import re
import time

import numpy as np
import tensorflow as tf

from frameworks.shared.image_input import AUGMENT, MEAN, STD, Shard, StallMeter
from frameworks.shared.keras import training
from harness.contract.axes import Storage
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.storage import backends as storage

PREFETCH_BATCHES = 2  # with workers: batches ready ahead of the step (the DataLoader's prefetch_factor)
_STORAGE_ERROR = re.compile(r"StorageError: (storage [^\n]*)")


def crop_window(height: tf.Tensor, width: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """[top, left, crop height, crop width] (int32): all AUGMENT.attempts candidate crops drawn at once,
    the first that fits taken, else the centred square (frameworks.shared.image_input.crop_box in TF ops)."""
    h, w = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    seeds = tf.random.experimental.stateless_split(seed, 3)
    n = AUGMENT.attempts
    target = h * w * tf.random.stateless_uniform([n], seeds[0], AUGMENT.scale[0], AUGMENT.scale[1])
    aspect = tf.exp(tf.random.stateless_uniform([n], seeds[1], math.log(AUGMENT.ratio[0]),
                                                math.log(AUGMENT.ratio[1])))
    cw, ch = tf.round(tf.sqrt(target * aspect)), tf.round(tf.sqrt(target / aspect))  # round half to even, as Python
    fits = (cw > 0) & (cw <= w) & (ch > 0) & (ch <= h)
    first = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)
    side = tf.minimum(h, w)
    found = tf.reduce_any(fits)
    cw, ch = tf.where(found, cw[first], side), tf.where(found, ch[first], side)
    offsets = tf.random.stateless_uniform([2], seeds[2])  # uniform integer offsets in [0, room]
    left = tf.where(found, tf.floor(offsets[0] * (w - cw + 1)), tf.floor((w - side) / 2))
    top = tf.where(found, tf.floor(offsets[1] * (h - ch + 1)), tf.floor((h - side) / 2))
    return tf.cast(tf.stack([top, left, ch, cw]), tf.int32)


def decode_augment(data: tf.Tensor, size: int, seed: tf.Tensor) -> tf.Tensor:
    """JPEG bytes -> random resized crop (size x size), flipped with probability AUGMENT.flip,
    normalized: float32 (size, size, 3)."""
    shape = tf.io.extract_jpeg_shape(data)
    crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    image = tf.io.decode_and_crop_jpeg(data, crop_window(shape[0], shape[1], crop_seed), channels=3)
    image = tf.image.resize(image, [size, size], method="bilinear", antialias=True)
    flip = tf.random.stateless_uniform([], flip_seed) < AUGMENT.flip
    image = tf.cond(flip, lambda: tf.image.flip_left_right(image), lambda: image)
    return (image - MEAN) / STD


class Pipeline:
    """An endless stream of (images NHWC, labels) batches from a rank's shard, with the counts the
    ``data`` record needs (bytes, objects and checks of the batches the training loop consumed)."""

    def __init__(self, spec: RunSpec, rank: int, world: int):
        self.shard = Shard(spec, rank, world)
        self.store, self.staging_s = self.shard.store, self.shard.staging_s
        self.batch = spec.batch_per_worker
        self.dataset = self._build(self.shard, self.batch, spec.seed * 1000 + rank)
        self._iter = iter(self.dataset)
        self.bytes_read = 0
        self.objects_read = 0
        self.verified = 0

    @staticmethod
    def _build(shard: Shard, batch: int, seed: int) -> tf.data.Dataset:
        workers, size = shard.loader_workers, shard.image_size
        labels = tf.constant(shard.labels, tf.int32)

        def read(index: tf.Tensor) -> tuple[bytes, int, int]:  # Python, in a tf.data thread: I/O releases the GIL
            data, checked = shard.read(int(index))
            return data, len(data), checked

        def load(position: tf.Tensor, index: tf.Tensor):
            data, nbytes, checked = tf.py_function(read, [index], [tf.string, tf.int64, tf.int64])
            data.set_shape([])
            # augmentation seeded by (run seed and rank, position in the stream): a new crop every epoch
            image = decode_augment(data, size, tf.stack([tf.constant(seed, tf.int64), position]))
            image.set_shape([size, size, 3])
            return image, labels[index], tf.reshape(nbytes, []), tf.reshape(checked, [])

        parallel = workers if workers > 0 else None
        dataset = (tf.data.Dataset.range(len(shard))
                   .shuffle(len(shard), seed=seed, reshuffle_each_iteration=True)
                   .repeat()
                   .enumerate()
                   .map(load, num_parallel_calls=parallel)
                   .batch(batch, drop_remainder=True))  # batches run across epochs: always full
        if workers > 0:
            dataset = dataset.prefetch(PREFETCH_BATCHES)
        options = tf.data.Options()
        options.threading.private_threadpool_size = max(1, workers)
        options.autotune.enabled = False  # the parallelism is the loader_workers setting, not tf.data's choice
        options.experimental_optimization.inject_prefetch = False
        options.experimental_optimization.map_parallelization = False
        return dataset.with_options(options)

    def cached_objects(self) -> int | None:
        return self.shard.cached_objects()

    def fill_cache(self) -> None:
        self.shard.fill_cache()

    def next(self) -> tuple[tf.Tensor, tf.Tensor]:
        try:
            images, labels, sizes, checked = next(self._iter)
        except (tf.errors.OpError, storage.StorageError) as exc:
            # a StorageError raised in the tf.py_function reaches here wrapped in TensorFlow's error, with a
            # traceback: keep the one line that names the backend and the object
            found = _STORAGE_ERROR.search(str(exc))
            if found:
                raise storage.StorageError(found.group(1).strip()) from None
            raise
        self.bytes_read += int(np.sum(sizes))
        self.objects_read += int(sizes.shape[0])
        self.verified += int(np.sum(checked))
        return images, labels

    def loader_only(self, batches: int) -> float:
        """Samples/s of the pipeline alone (no model): ``batches`` batches after the training window."""
        # a fresh iterator: batches prefetched during training would otherwise be counted for free
        self._iter = iter(self.dataset)
        t0 = time.perf_counter()
        for _ in range(batches):
            self.next()
        return batches * self.batch / (time.perf_counter() - t0)


class Feed:
    """Where a TensorFlow worker's batches come from: the fixed synthetic batch (made once, before
    timing), or this pipeline, each wait for a batch timed for the data record."""

    def __init__(self, spec: RunSpec, rank: int, world: int):
        self.spec = spec
        self.pipeline: Pipeline | None = None
        self.meter: StallMeter | None = None
        if spec.storage == Storage.SYNTHETIC:
            self._batch = training.synthetic_batch(spec.workload, spec.workload_options, spec.batch_per_worker,
                                                   spec.seed, rank)
            return
        self.pipeline = Pipeline(spec, rank, world)
        if spec.storage.fills_cache:
            self.pipeline.fill_cache()
        self.meter = StallMeter(self.pipeline)

    def next(self) -> dict[str, tf.Tensor]:
        if self.meter is None:
            return self._batch
        images, labels = self.meter.next_batch(self.pipeline.next)
        return {"images": images, "labels": labels}

    def between_steps(self):
        """For run_measured_loop: the pipeline's counters at the window's start (None: synthetic)."""
        return None if self.meter is None else self.meter.between_steps(self.spec.warmup_steps)

    def emit_data(self, events: EventWriter, window: dict[str, float]) -> None:
        """The ``data`` record of a real-data run (nothing for synthetic data)."""
        if self.meter is not None:
            events.emit("data", **self.meter.record(window, self.spec.measured_steps))
