"""Real-data runs of the TensorFlow and Chainer frameworks: tf.data and a Chainer MultiprocessIterator read
JPEGs made by `rosetta data make` through the harness's storage backends, decode and augment them, and
train ResNet-50 on them under each framework's own launcher; nothing is mocked. The frameworks are
imported only in their worker processes."""

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from harness.experiment import scenario
from harness.running.runner import run_sweep
from harness.storage import datagen

TF_MISSING = importlib.util.find_spec("tensorflow") is None
needs_tf = pytest.mark.skipif(TF_MISSING, reason="tensorflow is not installed (pip install -e '.[tf]')")
CHAINER_MISSING = [m for m in ("chainer", "mpi4py") if importlib.util.find_spec(m) is None]
needs_chainer = pytest.mark.skipif(bool(CHAINER_MISSING) or shutil.which("mpirun") is None,
                                   reason="chainer + mpi4py and mpirun needed")
needs_horovod = pytest.mark.skipif(TF_MISSING or importlib.util.find_spec("horovod") is None,
                                   reason="tensorflow and horovod needed (tools/install_horovod.py)")

BASE = """
name = "input-run"
[settings]
warmup_steps = 1
measured_steps = 3
repeats = 1
timeout_s = 300
device = "cpu"
[matrix]
framework = {framework}
workload = "resnet50"
size = "tiny"
procs_per_node = {procs}
batch_per_worker = 2
storage = {storage}
"""


def _local(root, workers=1) -> str:
    return f"""
[storage_options.local]
url = "{root}"
verify_fraction = 1.0
loader_workers = {workers}
"""


def _data_records(row) -> list[dict]:
    run_dir = Path(row["run_dir"])
    return [json.loads(line) for r in range(row["world_size"])
            for line in (run_dir / f"events-rank{r}.jsonl").read_text().splitlines()
            if json.loads(line)["event"] == "data"]


def _check_real_data_row(row):
    assert row["status"] == "ok", row.get("reason")
    records = _data_records(row)
    assert len(records) == row["world_size"]  # every rank measured its own pipeline
    assert 0 <= row["data_stall_frac"] <= 1
    # each rank consumed 1 warm-up + 3 measured batches of 2 and a 3-batch loader-only pass, all checked
    assert row["objects_verified"] == row["world_size"] * (1 + 3 + 3) * 2
    assert all(r["objects_read"] == 3 * 2 for r in records)  # the window's batches, counted as consumed
    assert row["read_mb_s"] * row["window_s"] == pytest.approx(sum(r["bytes_read"] for r in records) / 1e6)
    assert row["loader_throughput"] > 0 and row["cache_hit_rate"] is None
    assert row["weights_consistent"] is True


@needs_tf
def test_tf_mwms_trains_on_real_images_through_tf_data(image_files, write_scenario, tmp_path):
    """Two workers, each reading its own shard (one worker reads through tf.data in the s3, nfs, cache and
    corrupted-object tests below)."""
    text = BASE.format(framework='"tf_mwms"', procs=2, storage='"local"') + _local(image_files, workers=2)
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    _check_real_data_row(row)


@needs_horovod
def test_horovod_tf_trains_on_real_images_through_tf_data(image_files, write_scenario, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # horovodrun
    text = BASE.format(framework='"horovod_tf"', procs=2, storage='"local"') + _local(image_files, workers=0)
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    _check_real_data_row(rows[0])


@needs_chainer
def test_chainer_trains_on_real_images_through_a_multiprocess_iterator(image_files, write_scenario, tmp_path):
    """2 MPI ranks, each with 2 iterator processes forked after MPI_Init."""
    text = BASE.format(framework='"chainer"', procs=2, storage='"local"') + _local(image_files, workers=2)
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    _check_real_data_row(rows[0])
    assert rows[0]["launcher"] == "mpirun"


@pytest.mark.skipif(TF_MISSING and bool(CHAINER_MISSING), reason="neither tensorflow nor chainer is installed")
def test_corrupted_object_fails_tf_and_chainer_runs_naming_backend_and_object(tmp_path, write_scenario):
    root = tmp_path / "d"
    manifest = datagen.make(datagen.parse_spec({"count": 4, "classes": 2, "min_kb": 5, "max_kb": 10,
                                                "layout": "files"}, "t"), root)
    victim = manifest["samples"][0]["file"]
    (root / victim).write_bytes((root / victim).read_bytes()[:-100])  # still a JPEG start, wrong bytes
    frameworks = [f for f, missing in (("tf_mwms", TF_MISSING), ("chainer", CHAINER_MISSING)) if not missing]
    text = BASE.format(framework=json.dumps(frameworks), procs=1, storage='"local"') + _local(root, workers=1)
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert [r["framework"] for r in rows] == frameworks
    for row in rows:
        assert row["status"] == "failed", row
        assert f"storage local: object local:{root}/{victim} failed its checksum" in row["reason"], row["reason"]


@needs_tf
def test_tf_mwms_reads_from_s3(image_files, s3_bucket, write_scenario, tmp_path):
    """SeaweedFS serves the dataset over S3; tf.data reads it through s3fs (the Store) in its threads."""
    url = s3_bucket.upload(image_files, "imagenet")
    text = BASE.format(framework='"tf_mwms"', procs=1, storage='"s3"') + f"""
[storage_options.s3]
url = "{url}"
endpoint_url = "{s3_bucket.endpoint}"
verify_fraction = 1.0
loader_workers = 2
"""
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    _check_real_data_row(rows[0])
    assert rows[0]["storage"] == "s3" and rows[0]["read_mb_s"] > 0
    assert s3_bucket.secret not in json.dumps({k: str(v) for k, v in rows[0].items()})


@needs_tf
def test_tf_mwms_reads_through_libnfs_from_several_loader_threads(nfs_images, write_scenario, tmp_path):
    """NFS-Ganesha exports the dataset over NFSv4; tf.data's 2 loader threads read it, each with its own
    libnfs context (frameworks.shared.image_input.Shard.thread_store)."""
    text = BASE.format(framework='"tf_mwms"', procs=1, storage='"nfs"') + f"""
[storage_options.nfs]
url = "{nfs_images}"
verify_fraction = 1.0
loader_workers = 2
"""
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    _check_real_data_row(rows[0])
    assert json.loads(rows[0]["spec"])["storage_options"]["url"].startswith("nfs://127.0.0.1:")


@pytest.mark.skipif(TF_MISSING and bool(CHAINER_MISSING), reason="neither tensorflow nor chainer is installed")
def test_cold_and_warm_cache_in_front_of_a_folder(write_scenario, tmp_path):
    """fsspec's filecache, emptied before the cold run and filled before the warm run's window: tf.data's
    threads and Chainer's processes each open their own cache object on the rank's cache folder."""
    # more objects than the loaders read ahead before the window (a slow first step lets tf.data's threads
    # run ahead to the end of a 12-image set): the cold window must still miss
    image_files = tmp_path / "imagenet"
    datagen.make(datagen.parse_spec({"count": 48, "classes": 3, "min_kb": 3, "max_kb": 6, "layout": "files"},
                                    "test"), image_files)
    frameworks = [f for f, missing in (("tf_mwms", TF_MISSING), ("chainer", CHAINER_MISSING)) if not missing]
    text = BASE.format(framework=json.dumps(frameworks), procs=1, storage='["cached", "cached_warm"]')
    for name in ("cached", "cached_warm"):
        text += f"""
[storage_options.{name}]
url = "{image_files}"
remote = "local"
cache_dir = "{tmp_path / name}"
verify_fraction = 1.0
loader_workers = 2
"""
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert len(rows) == 2 * len(frameworks)
    for row in rows:
        assert row["status"] == "ok", row.get("reason")
        # 48 objects: before the window at most the warm-up batch and what the loader read ahead are cached
        if row["storage"] == "cached":
            assert row["cache_hit_rate"] < 1.0, row["framework"]
        else:
            assert row["cache_hit_rate"] == 1.0, row["framework"]
