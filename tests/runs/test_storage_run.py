"""Real-data runs: torchrun workers read JPEGs through a DataLoader from real storage (a folder, and
SeaweedFS over S3 through the cache), with checksums verified; a corrupted object fails the run."""

import json

import pytest

pytest.importorskip("torch")

from harness.experiment import scenario  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402
from harness.storage import backends as storage, datagen
from tests.helpers.records import rank_events

BASE = """
name = "storage-run"
[settings]
warmup_steps = 1
measured_steps = 3
repeats = 1
timeout_s = 240
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
procs_per_node = {procs}
batch_per_worker = 2
storage = {storages}
"""


def test_local_storage_run_measures_the_input_pipeline(image_files, write_scenario, tmp_path):
    text = BASE.format(procs=2, storages='"local"') + f"""
[storage_options.local]
url = "{image_files}"
verify_fraction = 1.0
loader_workers = 1
"""
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok"], [r.get("reason") for r in rows]
    row = rows[0]
    assert 0 <= row["data_stall_frac"] <= 1
    # 3 measured steps x 2 images x 2 ranks, each 5-20 KB (+ up to a batch of prefetch counted on consumption)
    assert row["read_mb_s"] * row["window_s"] == pytest.approx(
        sum(e["bytes_read"] for r in range(2) for e in rank_events(row, r, "data")) / 1e6)
    assert row["loader_throughput"] > 0
    assert row["objects_verified"] > 0  # every object read was checked
    assert row["cache_hit_rate"] is None and row["staging_s"] is None
    assert json.loads(row["spec"])["storage_options"]["url"] == str(image_files)


def test_corrupted_object_fails_the_run_naming_backend_and_object(tmp_path, write_scenario):
    root = tmp_path / "d"
    manifest = datagen.make(datagen.parse_spec({"count": 4, "classes": 2, "min_kb": 5, "max_kb": 10,
                                                "layout": "files"}, "t"), root)
    victim = root / manifest["samples"][0]["file"]
    victim.write_bytes(victim.read_bytes()[:-100])  # truncated on disk: still decodable-ish, wrong bytes
    text = BASE.format(procs=1, storages='"local"') + f"""
[storage_options.local]
url = "{root}"
verify_fraction = 1.0
loader_workers = 1
"""
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert rows[0]["status"] == "failed"
    assert "storage local: object" in rows[0]["reason"] and manifest["samples"][0]["file"] in rows[0]["reason"]
    assert "checksum" in rows[0]["reason"]


def test_s3_cold_and_warm_cache_runs(image_files, s3_bucket, write_scenario, tmp_path):
    url = s3_bucket.upload(image_files, "imagenet")
    text = BASE.format(procs=1, storages='["s3", "cached", "cached_warm"]')
    for name in ("s3", "cached", "cached_warm"):
        text += f"""
[storage_options.{name}]
url = "{url}"
endpoint_url = "{s3_bucket.endpoint}"
loader_workers = 1
""" + (f'remote = "s3"\ncache_dir = "{tmp_path / name}"\n' if name != "s3" else "")
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    by = {r["storage"]: r for r in rows}
    assert all(r["status"] == "ok" for r in rows), [r.get("reason") for r in rows]
    assert by["s3"]["cache_hit_rate"] is None and by["s3"]["read_mb_s"] > 0
    assert by["cached"]["cache_hit_rate"] < 0.5  # cold: emptied before the run, most reads go to the server
    assert by["cached_warm"]["cache_hit_rate"] == 1.0  # warm: filled before the window
    for row in rows:  # the secret never reaches a row
        assert s3_bucket.secret not in json.dumps({k: str(v) for k, v in row.items()})


def test_nfs_run_reads_through_libnfs_without_mounting(nfs_images, write_scenario, tmp_path):
    """NFS-Ganesha exports the dataset over NFSv4; the DataLoader's worker reads it with libnfs."""
    text = BASE.format(procs=1, storages='"nfs"') + f"""
[storage_options.nfs]
url = "{nfs_images}"
verify_fraction = 1.0
loader_workers = 1
"""
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok"], [r.get("reason") for r in rows]
    assert rows[0]["read_mb_s"] > 0 and rows[0]["objects_verified"] > 0
    assert json.loads(rows[0]["spec"])["storage_options"]["url"].startswith("nfs://127.0.0.1:")


def _rosetta_run(text, write_scenario, results):
    """A scenario through the `rosetta run` command; returns its rows as dicts."""
    from harness.cli.main import main
    from harness.results import table as results_table

    main(["run", str(write_scenario(text)), "--results", str(results)])
    return results_table.load(results).to_dict("records")


@pytest.fixture(scope="module")
def text_dataset(tmp_path_factory):
    """BERT tiny's sequences (32 tokens) in 8 partitions of 4: a few steps cross partitions' ends, where
    their checksums are checked."""
    root = tmp_path_factory.mktemp("bert")
    datagen.make(datagen.parse_spec({"kind": "bert", "partitions": 8, "partition_samples": 4, "seq_len": 32,
                                     "max_predictions": 5}, "test"), root)
    return root


def test_bert_tiny_trains_from_local_token_partitions(text_dataset, write_scenario, tmp_path):
    text = BASE.replace('workload = "resnet50"', 'workload = "bert"').format(procs=2, storages='"local"') + f"""
[storage_options.local]
url = "{text_dataset}"
verify_fraction = 1.0
loader_workers = 2
"""
    rows = _rosetta_run(text, write_scenario, tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok"], [r.get("reason") for r in rows]
    row = rows[0]
    assert row["workload"] == "bert" and row["storage"] == "local" and row["weights_consistent"]
    assert 0 <= row["data_stall_frac"] <= 1 and row["loader_throughput"] > 0
    data = [e for r in range(2) for e in rank_events(row, r, "data")]
    assert row["read_mb_s"] * row["window_s"] == pytest.approx(sum(d["bytes_read"] for d in data) / 1e6)
    assert row["read_mb_s"] > 0 and sum(d["objects_read"] for d in data) > 0  # partitions opened in the window
    assert row["objects_verified"] >= 2  # a partition is verified once its last record has been read
    assert json.loads(row["spec"])["storage_options"]["url"] == str(text_dataset)


def test_resnet_tiny_trains_from_tar_shards(write_scenario, tmp_path):
    root = tmp_path / "imagenet"
    datagen.make(datagen.parse_spec({"count": 16, "classes": 3, "min_kb": 5, "max_kb": 20, "layout": "shards",
                                     "shard_samples": 2}, "test"), root)
    text = BASE.format(procs=2, storages='"local"') + f"""
[storage_options.local]
url = "{root}"
layout = "shards"
verify_fraction = 1.0
loader_workers = 2
"""
    rows = _rosetta_run(text, write_scenario, tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok"], [r.get("reason") for r in rows]
    row = rows[0]
    assert row["read_mb_s"] > 0 and row["objects_verified"] > 0 and row["loader_throughput"] > 0
    assert json.loads(row["spec"])["storage_options"]["layout"] == "shards"


@pytest.mark.parametrize("damage, verify, message", [
    ("token", 1.0, "failed its checksum"),  # one token id changed, still inside the vocabulary: the checksum
    ("label", 0.0, "is not a valid partition: masked_lm_ids outside"),  # a label no model has: always caught
])
def test_corrupted_partition_fails_the_run_naming_backend_and_object(write_scenario, tmp_path, damage, verify,
                                                                     message):
    import numpy as np

    root = tmp_path / "bert"
    datagen.make(datagen.parse_spec({"kind": "bert", "partitions": 2, "partition_samples": 4, "seq_len": 32,
                                     "max_predictions": 5}, "test"), root)
    victim = root / "bert" / "part-00000.npy"
    records = np.load(victim).copy()
    if damage == "token":
        records["input_ids"][0, 5] = 2000 if records["input_ids"][0, 5] != 2000 else 2001
    else:
        records["masked_lm_ids"][3, 0] = 40_000
    np.save(victim, records)
    text = BASE.replace('workload = "resnet50"', 'workload = "bert"').format(procs=1, storages='"local"') + f"""
[storage_options.local]
url = "{root}"
verify_fraction = {verify}
loader_workers = 1
"""
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert rows[0]["status"] == "failed"
    assert "storage local: object" in rows[0]["reason"] and "bert/part-00000.npy" in rows[0]["reason"]
    assert message in rows[0]["reason"]


def test_a_dataset_of_the_other_kind_fails_the_run_saying_so(image_files, write_scenario, tmp_path):
    text = BASE.replace('workload = "resnet50"', 'workload = "bert"').format(procs=1, storages='"local"') + f"""
[storage_options.local]
url = "{image_files}"
loader_workers = 0
"""
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert rows[0]["status"] == "failed" and "is a dataset of kind imagenet; workload bert reads kind bert" in rows[0]["reason"]


def test_s3_streams_bert_partitions_and_image_shards(text_dataset, s3_bucket, tmp_path):
    """The input pipeline alone against SeaweedFS: each rank its own partitions / shards, checksums verified."""
    import dataclasses

    from frameworks.shared.pytorch.input_pipeline import Pipeline
    from harness.contract.axes import Device, Size, Storage, Strategy, Workload
    from harness.contract.spec import RunSpec
    from harness.contract.workloads import WORKLOADS

    images = tmp_path / "imagenet"
    datagen.make(datagen.parse_spec({"count": 8, "classes": 2, "min_kb": 5, "max_kb": 10, "layout": "shards",
                                     "shard_samples": 2}, "t"), images)
    urls = {name: s3_bucket.upload(root, name) for name, root in (("bert", text_dataset), ("imagenet", images))}
    seen = {}
    for workload, name, layout in ((Workload.BERT, "bert", "files"), (Workload.RESNET50, "imagenet", "shards")):
        options = dataclasses.asdict(storage.StorageOptions(url=urls[name], endpoint_url=s3_bucket.endpoint,
                                                            verify_fraction=1.0, loader_workers=1, layout=layout))
        for rank in range(2):
            spec = RunSpec(scenario="s", framework="torch_ddp", workload=workload, size=Size.TINY,
                           workload_options=WORKLOADS[workload].options(Size.TINY), nodes=1, procs_per_node=2,
                           batch_per_worker=4, strategy=Strategy.ALLREDUCE, storage=Storage.S3, repeat=0,
                           warmup_steps=0, measured_steps=1, timeout_s=60, device=Device.CPU, seed=0,
                           storage_options=options)
            pipeline = Pipeline(spec, rank, 2)
            for _ in range(40):  # 160 samples: every object of the rank read at least once
                batch = pipeline.next_batch()
            seen[(name, rank)] = (pipeline.shard.objects, pipeline.verified, pipeline.bytes_read, batch)
    assert seen[("bert", 0)][0] == [f"bert/part-{i:05d}.npy" for i in (0, 2, 4, 6)]
    assert seen[("bert", 1)][0] == [f"bert/part-{i:05d}.npy" for i in (1, 3, 5, 7)]
    assert seen[("imagenet", 0)][0] == ["shards/train-000000.tar", "shards/train-000002.tar"]
    for (name, rank), (objects, verified, bytes_read, batch) in seen.items():
        assert verified >= len(objects) and bytes_read > 0
        if name == "bert":
            assert batch["input_ids"].shape == (4, 32) and batch["next_sentence_label"].shape == (4,)
        else:
            assert batch["images"].shape == (4, 3, 32, 32)


def _image_pipeline(root, layout, workers, verify=1.0):
    import dataclasses

    from frameworks.shared.pytorch.input_pipeline import Pipeline
    from harness.contract.axes import Device, Size, Storage, Strategy, Workload
    from harness.contract.spec import RunSpec
    from harness.contract.workloads import WORKLOADS

    options = dataclasses.asdict(storage.StorageOptions(url=str(root), verify_fraction=verify,
                                                        loader_workers=workers, layout=layout))
    spec = RunSpec(scenario="s", framework="torch_ddp", workload=Workload.RESNET50, size=Size.TINY,
                   workload_options=WORKLOADS[Workload.RESNET50].options(Size.TINY), nodes=1, procs_per_node=1,
                   batch_per_worker=2, strategy=Strategy.ALLREDUCE, storage=Storage.LOCAL, repeat=0, warmup_steps=0,
                   measured_steps=1, timeout_s=60, device=Device.CPU, seed=0, storage_options=options)
    return Pipeline(spec, 0, 1)


@pytest.mark.parametrize("damage, message", [
    ("flip", "failed its checksum"),  # one byte of a JPEG changed: still a tar, wrong bytes
    ("truncate", "is not a valid tar shard"),  # cut inside a member: tarfile runs out of data
])
@pytest.mark.parametrize("workers", [0, 1])
def test_damaged_shard_fails_naming_backend_and_object(tmp_path, damage, message, workers):
    root = tmp_path / "imagenet"
    datagen.make(datagen.parse_spec({"count": 4, "classes": 2, "min_kb": 5, "max_kb": 10, "layout": "shards",
                                     "shard_samples": 4}, "t"), root)
    victim = root / "shards" / "train-000000.tar"
    data = bytearray(victim.read_bytes())
    if damage == "flip":
        data[2000] ^= 0x01  # inside the first JPEG (its 512-byte tar header comes first)
    else:
        del data[len(data) // 2:]
    victim.write_bytes(bytes(data))
    pipeline = _image_pipeline(root, "shards", workers)
    with pytest.raises(storage.StorageError, match=rf"^storage local: object local:.*shards/train-000000\.tar.* {message}"):
        for _ in range(4):
            pipeline.next_batch()


def test_shards_layout_without_shards_says_how_to_make_them(tmp_path):
    root = tmp_path / "imagenet"
    datagen.make(datagen.parse_spec({"count": 2, "min_kb": 5, "max_kb": 10, "layout": "files"}, "t"), root)
    with pytest.raises(storage.StorageError, match="has 0 shards.*--layout shards or both"):
        _image_pipeline(root, "shards", 0)
