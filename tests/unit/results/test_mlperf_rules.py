"""MLPerf Storage's run rules as pure checks (harness/results/mlperf.py), the page-cache facts
(harness/storage/page_cache.py) and the scenario setting ``rules = "mlperf_storage"``: no run launched here
(tests/runs/test_mlperf_storage_run.py runs the mode against the real servers)."""

import json

import pytest
from hypothesis import given, strategies as st

from harness.base.errors import UserError
from harness.contract.axes import CacheDrop, Rules
from harness.experiment import matrix, scenario
from harness.results import mlperf
from harness.storage import datagen, page_cache

GIB = 2**30


def reads(**changes) -> mlperf.Reads:
    base = dict(dataset_bytes=30_000_000, share_samples=2000, run_samples=2000, memory_bytes=24 * GIB,
                available_bytes=16 * GIB, drop=CacheDrop.NONE, read_before="")
    return mlperf.Reads(**{**base, **changes})


def test_a_dataset_that_fits_in_memory_could_be_cached_unless_emptied_and_read_once():
    caching, why = mlperf.potential_caching(reads())
    assert caching and "not emptied" in why
    caching, why = mlperf.potential_caching(reads(drop=CacheDrop.DROP_CACHES))
    assert not caching and "emptied before the run (drop_caches) and each object read once" in why
    # emptied, but a rank takes more than its share: its second epoch comes from memory
    caching, why = mlperf.potential_caching(reads(drop=CacheDrop.DROP_CACHES, run_samples=2001))
    assert caching and "2001 samples of its 2000" in why
    caching, why = mlperf.potential_caching(reads(drop=CacheDrop.FADVISE, read_before="warm"))
    assert caching and why.endswith("warm")


def test_a_dataset_larger_than_available_memory_cannot_be_held():
    caching, why = mlperf.potential_caching(reads(dataset_bytes=17 * GIB, run_samples=10**6))
    assert not caching and "> 16.00 GiB available" in why


def test_the_5x_rule_holds_or_its_substitute_the_cache_emptied_and_every_object_read_once():
    assert mlperf.page_cache_violation(reads(dataset_bytes=120 * GIB, available_bytes=130 * GIB)) is None
    assert mlperf.page_cache_violation(reads(drop=CacheDrop.DROP_CACHES)) is None
    broken = mlperf.page_cache_violation(reads())
    assert broken.startswith("page_cache: dataset 30.0 MB < 5 x 24.00 GiB memory, and the page cache was not emptied")
    assert "objects read again" in mlperf.page_cache_violation(reads(drop=CacheDrop.DROP_CACHES, run_samples=4000))


@given(size=st.integers(0, 10**13), memory=st.integers(1, 10**12), available=st.integers(0, 10**12),
       run=st.integers(1, 10**6), share=st.integers(1, 10**6), drop=st.sampled_from(list(CacheDrop)),
       before=st.sampled_from(["", "warm"]))
def test_the_page_cache_rule_breaks_exactly_when_a_small_dataset_could_be_cached(size, memory, available, run,
                                                                               share, drop, before):
    r = mlperf.Reads(size, share, run, memory, available, drop, before)
    broken = mlperf.page_cache_violation(r) is not None
    assert broken == (size < 5 * memory and mlperf.potential_caching(r)[0])
    if not broken and size < 5 * memory and size <= available:  # its substitute held: emptied, read once
        assert drop != CacheDrop.NONE and run <= share and not before


def facts(**changes) -> mlperf.RunFacts:
    base = dict(reads=reads(drop=CacheDrop.DROP_CACHES, share_samples=4000, run_samples=4000), batch_per_worker=8,
                world_size=1, run_steps=500, repeats=6, au_rules=0.95, au_threshold=0.9,
                compute_source="MLPerf Storage v1.0 ResNet-50 H100", seeds_distinct=True)
    return mlperf.RunFacts(**{**base, **changes})


def test_a_run_that_keeps_every_rule_has_no_violation_and_each_broken_rule_is_named():
    assert mlperf.run_violations(facts()) == []
    broken = mlperf.run_violations(facts(run_steps=10, repeats=2, au_rules=0.5, compute_source="x128 (h100)",
                                         seeds_distinct=False, checkpoint_mb=200, reads=None))
    assert [v.split(":")[0] for v in broken] == ["page_cache", "run_steps", "au", "runs", "seed", "accelerator",
                                                 "checkpoint"]
    assert "fewer than 500 steps (10, from step 1)" in broken[1]
    # an epoch of 4000 / 8 = 500 steps is enough; 3999 samples are 499 steps
    assert mlperf.run_violations(facts(reads=reads(drop=CacheDrop.DROP_CACHES, share_samples=3999,
                                                   run_samples=3999)))[0].startswith("steps_per_epoch: ")


def test_a_set_replicates_within_5_percent_after_its_warm_up_run():
    assert mlperf.replication_spread([100, 104, 103, 101, 100]) == pytest.approx(0.04)
    assert mlperf.set_violations([], [[], [], [], [], []], [100, 104, 103, 101, 100]) == []
    broken = mlperf.set_violations([], [["au: low"], [], [], [], []], [100, 106, 103, 101, 100])
    assert broken[0] == "set: run 1 of 6 broke a rule (see its row)"
    assert broken[1].startswith("replication: the 5 runs after the warm-up run spread 6.0%")


def test_the_footprint_counts_the_objects_the_layout_reads(tmp_path):
    manifest = datagen.make(datagen.parse_spec({"count": 6, "classes": 2, "min_kb": 5, "max_kb": 10,
                                                "layout": "both", "shard_samples": 4}, "t"), tmp_path)
    files = page_cache.dataset_footprint(manifest, "files", str(tmp_path))
    assert files.samples == files.objects == 6 and files.bytes == manifest["total_bytes"]
    assert all(p.exists() for p in files.local_files)
    shards = page_cache.dataset_footprint(manifest, "shards", None)
    assert shards.samples == 6 and shards.objects == 2 and shards.local_files == ()
    assert shards.bytes == sum(s["bytes"] for s in manifest["shards"])
    # dropping the dataset's pages works without root too (posix_fadvise on its own files)
    assert page_cache.drop(files.local_files) in (CacheDrop.DROP_CACHES, CacheDrop.FADVISE)
    total, available = page_cache.memory()
    assert 0 < available <= total


MODE = """
name = "mlperf"
[settings]
warmup_steps = 1
measured_steps = 4
repeats = 3
seed = 7
device = "{device}"
rules = "mlperf_storage"
[emulation]
compute_s = 0.01
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
batch_per_worker = [2, 4]
storage = "local"
[storage_options.local]
url = "/tmp/data"
"""


def test_the_mode_runs_a_configurations_runs_together_each_with_its_own_seed(write_scenario):
    specs = matrix.expand(scenario.load(write_scenario(MODE.format(device="emulated"))))
    assert [(s.batch_per_worker, s.repeat, s.seed) for s in specs] == [(2, 0, 7), (2, 1, 8), (2, 2, 9),
                                                                        (4, 0, 7), (4, 1, 8), (4, 2, 9)]
    assert all(s.rules == Rules.MLPERF_STORAGE for s in specs)
    assert len({s.config_id() for s in specs[:3]}) == 1  # one configuration, whatever each run's seed
    assert specs[0].config_id() != specs[3].config_id()
    ours = MODE.format(device="emulated").replace('rules = "mlperf_storage"\n', "")
    plain = matrix.expand(scenario.load(write_scenario(ours)))
    assert [(s.repeat, s.seed) for s in plain[:2]] == [(0, 7), (0, 7)]  # interleaved, one seed
    assert plain[0].config_id() != specs[0].config_id()
    assert json.loads(json.dumps(specs[1].to_json()))["rules"] == "mlperf_storage"


def test_the_mode_needs_emulated_accelerators_and_a_known_name(write_scenario):
    text = MODE.format(device="cpu").replace("[emulation]\ncompute_s = 0.01\n", "")
    with pytest.raises(UserError, match=r"\[settings\] rules: mlperf_storage needs device = \"emulated\""):
        scenario.load(write_scenario(text))
    with pytest.raises(UserError, match="rules"):
        scenario.load(write_scenario(MODE.format(device="emulated").replace("mlperf_storage", "mlperf")))


def test_the_rules_measures_count_from_step_1_and_take_the_slowest_ranks_own_checkpoint_rate(tmp_path):
    from harness.contract.events import EventWriter, read_rank
    from harness.running import storage_rules

    for rank, (run_s, first_s, written, save_s) in enumerate(((16.8, 0.99, 200_000_000, 2.0), (17.0, 1.2, 0, 0.1))):
        events = EventWriter(tmp_path, rank)
        events.emit("emulation", compute_s=0.4, run_steps=40, run_s=run_s, first_step_s=first_s, au=0.98)
        events.emit("checkpoint", bytes_written=written, bytes_read=200_000_000, save_s=save_s, load_s=1.0 + rank)
        events.close()
    ranks = [read_rank(tmp_path, r) for r in range(2)]
    measures = storage_rules.rules_measures(ranks, batch=16)
    # DLIO's AU: compute x (steps - 1) / (run - first step), averaged over ranks; samples/s summed over ranks
    assert measures["au_rules"] == pytest.approx((0.4 * 39 / 15.81 + 0.4 * 39 / 15.8) / 2)
    assert measures["throughput_rules"] == pytest.approx(40 * 16 / 16.8 + 40 * 16 / 17.0)
    # a checkpoint's GB/s: the minimum over ranks of each one's own (rank 1 wrote nothing: left out)
    assert measures["checkpoint_save_gb_s_rules"] == pytest.approx(0.1)
    assert measures["checkpoint_load_gb_s_rules"] == pytest.approx(0.1)  # rank 1: 0.2 GB in 2 s
