"""BERT partitions' load times (the seed's per-partition data load, issue 19): two emulated accelerators
stream their own token partitions through one loader worker each; every partition read to its end in
the window is in the rank's data record (path, bytes, seconds) and summed up in the row."""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from harness.experiment import scenario  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402
from harness.storage import datagen  # noqa: E402

BATCH, PER_PARTITION, MEASURED = 4, 16, 8  # 4 batches a partition: a rank finishes 2 in its 8 steps

TEXT = """
name = "bert-partitions"
[settings]
warmup_steps = 0
measured_steps = {measured}
repeats = 1
timeout_s = 240
device = "emulated"
seed = 0
[emulation]
compute_s = 0.02
[matrix]
framework = "torch_ddp"
workload = "bert"
size = "tiny"
precision = "fp32"
procs_per_node = 2
batch_per_worker = {batch}
storage = "local"
[storage_options.local]
url = "{url}"
loader_workers = 1
"""


def test_each_partition_loaded_in_the_window_is_recorded_and_summed(tmp_path, write_scenario):
    data = tmp_path / "bert"
    manifest = datagen.make(datagen.parse_spec({"kind": "bert", "partitions": 8, "partition_samples": PER_PARTITION,
                                                "seq_len": 32, "max_predictions": 5}, "test"), data)
    sizes = {p["path"]: p["bytes"] for p in manifest["partitions"]}
    text = TEXT.format(measured=MEASURED, batch=BATCH, url=data)
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok"], [r.get("reason") for r in rows]
    row = rows[0]
    loads = {}
    for rank in range(2):
        events = (Path(row["run_dir"]) / f"events-rank{rank}.jsonl").read_text().splitlines()
        [record] = [e for e in map(json.loads, events) if e["event"] == "data"]
        loads[rank] = record["partitions"]
    for rank, mine in loads.items():
        share = sorted(sizes)[rank::2]  # rank r streams partitions r, r + 2, ...
        # one block per partition, its load riding on its first batch: batches 1 and 5 of the rank's stream
        # (no warm-up) are the first of its 1st and 2nd partitions, in the rank's shuffled order
        order = np.random.default_rng([0, rank, 0, 1]).permutation(len(share))
        assert [p["path"] for p in mine] == [share[i] for i in order[:2]]
        assert [p["first"] for p in mine] == [True, False]  # the loader process's first (its client's set-up)
        for p in mine:
            assert p["bytes"] == sizes[p["path"]]  # read to the last byte, the header included
            assert 0 < p["seconds"] <= p["span_s"] < 60
    seconds = sorted(p["seconds"] for mine in loads.values() for p in mine)
    assert row["partitions_loaded"] == len(seconds) == 4
    assert row["partition_load_s_p50"] == pytest.approx(np.median(seconds))
    assert row["partition_load_s_max"] == pytest.approx(seconds[-1])
    assert row["partition_load_mb_s"] == pytest.approx(
        sum(p["bytes"] for mine in loads.values() for p in mine) / 1e6 / sum(seconds))
