"""The framework-free part of the real-data input (frameworks/shared/image_input.py) and the tf.data crop sampler
against it: shards, checks, crop boxes. TensorFlow runs in a subprocess (never imported by the tests)."""

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from frameworks.shared import image_input
from harness.contract.axes import Device, Size, Storage, Strategy, Workload
from harness.contract.spec import RunSpec
from harness.contract.workloads import WORKLOADS
from harness.storage import backends as storage, datagen


@given(st.integers(1, 3000), st.integers(1, 3000), st.integers(0, 2**32 - 1))
@settings(max_examples=300, deadline=None)
def test_crop_box_fits_the_image_with_the_augmentation_bounds(width, height, seed):
    left, top, w, h = image_input.crop_box(width, height, np.random.default_rng(seed))
    assert 0 <= left and left + w <= width and 0 <= top and top + h <= height and w > 0 and h > 0
    side = min(width, height)
    if (w, h) != (side, side):  # not the fallback: within the bounds up to rounding w and h to whole pixels
        (lo, hi), (smallest, _) = image_input.AUGMENT.ratio, image_input.AUGMENT.scale
        assert (w - 0.5) / (h + 0.5) <= hi and (w + 0.5) / (h - 0.5) >= lo
        assert (w + 0.5) * (h + 0.5) >= smallest * width * height


def _spec(root, world_rank_seed=0, fraction=1.0) -> RunSpec:
    options = dataclasses.asdict(storage.StorageOptions(url=str(root), verify_fraction=fraction, loader_workers=0))
    return RunSpec(scenario="t", framework="torch_ddp", workload=Workload.RESNET50, size=Size.TINY,
                   workload_options=WORKLOADS[Workload.RESNET50].options(Size.TINY), nodes=1, procs_per_node=3,
                   batch_per_worker=2, strategy=Strategy.ALLREDUCE, storage=Storage.LOCAL, repeat=0,
                   warmup_steps=1, measured_steps=2, timeout_s=60, device=Device.CPU, seed=world_rank_seed,
                   storage_options=options)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    manifest = datagen.make(datagen.DataSpec(count=10, classes=3, min_kb=3, max_kb=6, layout="files"), root)
    return root, manifest


def test_shards_split_the_dataset_and_check_what_they_read(dataset):
    root, manifest = dataset
    shards = [image_input.Shard(_spec(root), rank, 3) for rank in range(3)]
    files = [s["file"] for shard in shards for s in shard.samples]
    assert sorted(files) == sorted(s["file"] for s in manifest["samples"])  # every sample once, in some shard
    assert [len(s) for s in shards] == [4, 3, 3]
    data, checked = shards[1].read(0)
    assert data == (root / shards[1].samples[0]["file"]).read_bytes() and checked == 1
    half = image_input.Shard(_spec(root, fraction=0.5), 0, 1)
    assert sum(half.read(i)[1] for i in range(len(half))) == 5  # half of the 10 objects are checked


def test_each_loader_thread_reads_through_its_own_store(dataset):
    import pickle
    import threading

    root, _ = dataset
    shard = image_input.Shard(_spec(root), 0, 1)
    seen = []

    def read() -> None:
        shard.read(0)
        seen.append(shard.thread_store())

    threads = [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert shard.thread_store() is shard.store  # the training thread's own
    assert len({id(s) for s in seen + [shard.store]}) == 3 and all(s._fs is not shard.store._fs for s in seen)
    assert pickle.loads(pickle.dumps(shard)).read(1)[0] == shard.read(1)[0]  # picklable (loader processes)


def test_a_shard_names_backend_and_object_of_wrong_bytes(dataset, tmp_path):
    import shutil

    root, manifest = dataset
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    rel = manifest["samples"][0]["file"]
    (copy / rel).write_bytes(b"not a jpeg")
    with pytest.raises(storage.StorageError, match=f"storage local: object local:{copy}/{rel} failed its checksum"):
        image_input.Shard(_spec(copy), 0, 1).read(0)


def test_decode_augment_gives_normalized_channels_last_crops(dataset):
    root, manifest = dataset
    data = (root / manifest["samples"][0]["file"]).read_bytes()
    pixels = image_input.decode_augment(data, 24, np.random.default_rng(0))
    assert pixels.shape == (24, 24, 3) and pixels.dtype == np.float32
    assert -3 < pixels.mean() < 3  # normalized by ImageNet's mean and std, not 0-255


TF_CROPS = """
import json, sys
import tensorflow as tf
from frameworks.shared.keras.input_pipeline import crop_window
height, width, n = 300, 500, 2000
boxes = [crop_window(tf.constant(height), tf.constant(width), tf.constant([7, i], tf.int64)).numpy().tolist()
         for i in range(n)]
json.dump(boxes, sys.stdout)
"""


@pytest.mark.runs
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed")
def test_tf_crop_sampler_draws_the_crops_the_pillow_path_draws():
    """tf.data's crop_window (TF ops) and crop_box (NumPy) sample the same distribution: boxes inside the
    image, and the same mean area fraction, aspect and centre (2,000 draws each, fixed seeds)."""
    out = subprocess.run([sys.executable, "-c", TF_CROPS], capture_output=True, text=True, check=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    tf_boxes = np.array(json.loads(out.stdout), dtype=float)  # top, left, h, w
    height, width = 300, 500
    assert (tf_boxes[:, 0] >= 0).all() and (tf_boxes[:, 0] + tf_boxes[:, 2] <= height).all()
    assert (tf_boxes[:, 1] >= 0).all() and (tf_boxes[:, 1] + tf_boxes[:, 3] <= width).all()
    rng = np.random.default_rng(7)
    np_boxes = np.array([image_input.crop_box(width, height, rng) for _ in range(2000)], dtype=float)  # l, t, w, h

    def stats(area, aspect, cx, cy):
        return np.array([np.mean(area), np.mean(np.log(aspect)), np.mean(cx), np.mean(cy)])

    tf_stats = stats(tf_boxes[:, 2] * tf_boxes[:, 3] / (height * width), tf_boxes[:, 3] / tf_boxes[:, 2],
                     tf_boxes[:, 1] + tf_boxes[:, 3] / 2, tf_boxes[:, 0] + tf_boxes[:, 2] / 2)
    np_stats = stats(np_boxes[:, 2] * np_boxes[:, 3] / (height * width), np_boxes[:, 2] / np_boxes[:, 3],
                     np_boxes[:, 0] + np_boxes[:, 2] / 2, np_boxes[:, 1] + np_boxes[:, 3] / 2)
    # about 3 standard errors: area fraction within 0.025, mean log-aspect within 0.015, centres within 6 pixels
    assert (np.abs(tf_stats - np_stats) <= np.array([0.025, 0.015, 6, 6])).all(), (tf_stats, np_stats)
