"""Checkpoint save and load as a measured phase, through real backends: a local folder (fsync, pages
dropped), S3 (SeaweedFS), Azure Blob (Azurite) and NFS (NFS-Ganesha through libnfs, nothing mounted:
NFSv3 at full size, NFSv4 in the 3 KB pieces libnfs 4.0 can send); the cache tier's is in
test_cache_tier.py."""

import pytest

from harness.experiment import scenario
from harness.storage import backends as storage, checkpoint

pytest.importorskip("torch")

from harness.running.runner import run_sweep  # noqa: E402

RUN = """
name = "ckpt"
[settings]
warmup_steps = 1
measured_steps = 2
repeats = 1
timeout_s = 240
device = "{device}"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
procs_per_node = 2
batch_per_worker = 2
storage = "{storage}"
{emulation}
[storage_options.{storage}]
url = "{url}"
loader_workers = 0
checkpoint = "{mode}"
checkpoint_mb = {mb}
{extra}
"""


@pytest.mark.parametrize("mode", ["single", "sharded"])
def test_save_then_load_reads_back_the_bytes_saved_with_the_page_cache_dropped(tmp_path, mode):
    store = storage.Store("local", {"url": str(tmp_path)})
    payload = checkpoint.synthetic_payload(300_000, 0, 1, mode, seed=3)
    got = []
    record = checkpoint.save_and_load(store, "ck", mode, payload, 0, 1, barrier=lambda: None, decode=got.append)
    assert got == [payload] and len(payload) == 300_000
    assert record["bytes_written"] == record["bytes_read"] == 300_000
    assert record["save_s"] > 0 and record["load_s"] > 0 and record["cache_defeat"] == "fsync+fadvise_dontneed"
    assert (tmp_path / checkpoint.object_name("ck", mode, 0)).stat().st_size == 300_000
    # sharded parts: total / world each, rank 0 alone writes a single checkpoint
    assert len(checkpoint.synthetic_payload(300_000, 1, 3, "sharded")) == 100_000
    assert checkpoint.synthetic_payload(300_000, 1, 3, "single") == b""


def _run(text, write_scenario, tmp_path):
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok"], [r.get("reason") for r in rows]
    return rows[0]


def test_local_checkpoint_of_the_models_real_state_dict(image_files, write_scenario, tmp_path):
    """Trained ResNet-50 (tiny) on 2 CPU ranks; rank 0 saves its state_dict, both ranks load it (torch.load)."""
    text = RUN.format(device="cpu", storage="local", emulation="", url=image_files, mode="single", mb=0,
                      extra=f'checkpoint_dir = "{tmp_path}/ckpt"')
    row = _run(text, write_scenario, tmp_path)
    assert row["checkpoint_mode"] == "single" and row["checkpoint_bytes"] > 1_000_000  # the tiny model's weights
    assert row["checkpoint_save_s"] > 0 and row["checkpoint_load_gb_s"] > 0
    assert row["checkpoint_cache_defeat"] == "fsync+fadvise_dontneed"
    saved = list((tmp_path / "ckpt").rglob("model.ckpt"))
    assert len(saved) == 1 and saved[0].stat().st_size == row["checkpoint_bytes"]


def test_sharded_checkpoint_through_s3(image_files, s3_bucket, write_scenario, tmp_path):
    url = s3_bucket.upload(image_files, "imagenet")
    text = RUN.format(device="emulated", storage="s3", emulation="[emulation]\ncompute_s = 0.01", url=url,
                      mode="sharded", mb=2, extra=f'endpoint_url = "{s3_bucket.endpoint}"')
    row = _run(text, write_scenario, tmp_path)
    assert row["checkpoint_bytes"] == 2_000_000 and row["checkpoint_save_gb_s"] > 0
    assert row["checkpoint_cache_defeat"] == "put_committed, no client cache, rank_shift=1"
    shards = storage.Store("s3", {"url": url, "endpoint_url": s3_bucket.endpoint}).fs.find(f"{url}/checkpoints")
    assert len(shards) == 2


def test_single_checkpoint_through_blob(image_files, blob_container, write_scenario, tmp_path):
    url = blob_container(image_files, "imagenet")
    text = RUN.format(device="emulated", storage="blob", emulation="[emulation]\ncompute_s = 0.01", url=url,
                      mode="single", mb=1, extra="")
    row = _run(text, write_scenario, tmp_path)
    assert row["checkpoint_bytes"] == 1_000_000 and row["checkpoint_load_gb_s"] > 0
    assert row["checkpoint_cache_defeat"] == "put_committed, no client cache"


@pytest.mark.parametrize("mode, protocol", [("single", "v3"), ("sharded", "v4")])
def test_checkpoint_through_nfs_lands_on_the_servers_disk_and_reads_back(nfs_export, write_scenario, tmp_path,
                                                                         mode, protocol):
    options = getattr(nfs_export, protocol)
    extra = "\n".join(f"{key} = {value}" for key, value in options.items() if key != "url")
    text = RUN.format(device="emulated", storage="nfs", emulation="[emulation]\ncompute_s = 0.01",
                      url=options["url"], mode=mode, mb=1, extra=extra)
    row = _run(text, write_scenario, tmp_path)
    assert row["checkpoint_bytes"] == 1_000_000 and row["checkpoint_save_gb_s"] > 0 and row["checkpoint_load_gb_s"] > 0
    assert row["checkpoint_cache_defeat"] == ("nfs_commit, no client cache (libnfs), server cache kept"
                                              + (", rank_shift=1" if mode == "sharded" else ""))
    saved = sorted(nfs_export.disk.glob("checkpoints/*/*.ckpt"))  # on the server's disk, as each rank made it
    ranks = [0] if mode == "single" else [0, 1]
    assert [p.read_bytes() for p in saved] == [checkpoint.synthetic_payload(1_000_000, r, 2, mode) for r in ranks]
    # and read back through the client: the bytes a load returns are the bytes saved
    payload, got = checkpoint.synthetic_payload(50_000, 0, 1, mode, seed=5), []
    record = checkpoint.save_and_load(storage.Store("nfs", options), "again", mode, payload, 0, 1,
                                      barrier=lambda: None, decode=got.append)
    assert got == [payload] and record["written_as"] == "nfs_commit"
