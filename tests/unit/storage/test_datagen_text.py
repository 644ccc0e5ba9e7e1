"""`rosetta data make --kind bert`: pre-tokenized BERT partitions, deterministic from the seed, listed
with their checksums in the manifest; the streaming reader refuses every malformed partition."""

import hashlib
import io
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from harness.base.errors import UserError
from harness.cli.main import main
from harness.contract.equivalence import IGNORED_LABEL
from harness.storage import datagen, textdata

SEQ, PRED, VOCAB = 32, 5, 30522


def bert_spec(**over):
    return datagen.parse_spec({"kind": "bert", "partitions": 3, "partition_samples": 300, "seq_len": SEQ,
                               "max_predictions": PRED, **over}, "t")


def test_cli_writes_partitions_matching_the_manifest(tmp_path):
    assert main(["data", "make", str(tmp_path / "d"), "--kind", "bert", "--partitions", "2",
                 "--partition-samples", "50", "--seq-len", "64", "--max-predictions", "10"]) == 0
    manifest = json.loads((tmp_path / "d" / datagen.MANIFEST).read_text())
    assert manifest["format"] == datagen.MANIFEST_FORMAT and manifest["kind"] == "bert"
    assert [p["path"] for p in manifest["partitions"]] == ["bert/part-00000.npy", "bert/part-00001.npy"]
    assert manifest["objects"] == [{k: p[k] for k in ("path", "bytes", "sha256")} for p in manifest["partitions"]]
    for part in manifest["partitions"]:
        data = (tmp_path / "d" / part["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == part["sha256"] and len(data) == part["bytes"]
        records = np.load(io.BytesIO(data))  # plain NumPy opens a partition
        assert records.shape == (50,) and records.dtype == textdata.record_dtype(64, 10)
    assert manifest["total_bytes"] == sum(p["bytes"] for p in manifest["partitions"])


def test_records_are_masked_sentence_pairs(tmp_path):
    manifest = datagen.make(bert_spec(), tmp_path / "d")
    records = np.load(tmp_path / "d" / manifest["partitions"][1]["path"])
    textdata.check_records(records, SEQ, VOCAB)
    lengths = records["input_mask"].sum(1)
    assert (records["input_ids"][:, 0] == textdata.CLS).all()
    assert ((records["input_ids"] == textdata.SEP).sum(1) == 2).all()  # [CLS] A [SEP] B [SEP]
    assert (records["input_ids"][np.arange(len(records)), lengths - 1] == textdata.SEP).all()
    assert 0.85 < (lengths == SEQ).mean() < 0.95  # 10% shorter sequences, padded with 0
    assert (records["input_ids"][records["input_mask"] == 0] == textdata.PAD).all()
    segments = records["segment_ids"].astype(int)
    steps = np.diff(segments, axis=1)
    assert ((steps == 1).sum(1) == 1).all()  # one switch from A to B ...
    assert ((steps == -1).sum(1) == (lengths < SEQ)).all()  # ... and back to 0 only where the padding starts
    positions = records["masked_lm_positions"].astype(int)
    chosen = positions > 0
    assert (chosen.sum(1) >= 1).all() and (positions < lengths[:, None]).all()
    masked = records["input_ids"][np.nonzero(chosen)[0], positions[chosen]]
    assert 0.7 < (masked == textdata.MASK).mean() < 0.9  # 80% [MASK], the rest random or kept
    assert 0.4 < records["next_sentence_label"].mean() < 0.6
    batch = textdata.to_model_batch(records[:8])
    assert ((batch["labels"] != IGNORED_LABEL).sum(1) == chosen[:8].sum(1)).all()
    assert batch["input_ids"].dtype == np.int64 and batch["labels"].shape == (8, SEQ)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = datagen.make(bert_spec(), tmp_path / "a")
    b = datagen.make(bert_spec(), tmp_path / "b")
    c = datagen.make(bert_spec(seed=1), tmp_path / "c")
    assert a["objects"] == b["objects"]
    assert a["objects"][0]["sha256"] != c["objects"][0]["sha256"]
    assert a["objects"][0]["sha256"] != a["objects"][1]["sha256"]  # partitions differ from each other


def test_partition_size_is_the_record_count_times_889_bytes_at_seq_128(tmp_path):
    manifest = datagen.make(datagen.parse_spec({"kind": "bert", "partitions": 1, "partition_samples": 10_000},
                                               "t"), tmp_path / "d")
    assert textdata.record_dtype(128, 20).itemsize == 889  # 2,000,000 records: the published 1.8 GB
    header = manifest["partitions"][0]["bytes"] - 10_000 * 889  # the .npy header: the rest is the records
    assert 0 < header <= 512 and header % 64 == 0
    blocks = list(textdata.iter_blocks(open(tmp_path / "d" / manifest["partitions"][0]["path"], "rb"),
                                       128, 20, VOCAB, block=4096))
    assert [len(b) for b in blocks] == [4096, 4096, 1808]  # streamed in blocks, never whole


@pytest.mark.parametrize("table, key", [({"kind": "text"}, "kind"), ({"kind": "bert", "partitions": 0}, "partitions"),
                                        ({"kind": "bert", "seq_len": 16, "max_predictions": 14}, "max_predictions"),
                                        ({"kind": "bert", "vocab_size": 100}, "vocab_size")])
def test_bad_specs_are_one_line_errors(table, key):
    with pytest.raises(UserError, match=key):
        datagen.parse_spec(table, "spec.toml")


def test_format_1_manifests_are_still_read_and_unknown_ones_refused():
    old = {"format": 1, "samples": [], "objects": [{"path": "shards/train-000000.tar", "bytes": 1, "sha256": "x"},
                                                   {"path": "files/train/a.jpg", "bytes": 1, "sha256": "y"}]}
    manifest = datagen.read_manifest(json.dumps(old), "m.json")
    assert manifest["kind"] == "imagenet" and [s["path"] for s in manifest["shards"]] == ["shards/train-000000.tar"]
    with pytest.raises(UserError, match="m.json: manifest format 9"):
        datagen.read_manifest(json.dumps({"format": 9}), "m.json")
    with pytest.raises(UserError, match="kind 'video'"):
        datagen.read_manifest(json.dumps({"format": 2, "kind": "video"}), "m.json")
    with pytest.raises(UserError, match="not a JSON manifest"):
        datagen.read_manifest("[1,", "m.json")


@pytest.fixture(scope="module")
def partition():
    out = io.BytesIO()
    textdata.write_partition(out, 40, SEQ, PRED, VOCAB, seed=0, partition=0)
    return out.getvalue()


def read_all(data: bytes, seq=SEQ, pred=PRED, vocab=VOCAB, block=16):
    return sum(len(b) for b in textdata.iter_blocks(io.BytesIO(data), seq, pred, vocab, block=block))


def test_a_good_partition_reads_whole(partition):
    assert read_all(partition) == 40


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10**9))
def test_any_truncation_is_malformed(partition, cut):
    with pytest.raises(textdata.MalformedPartition):
        read_all(partition[: cut % len(partition)])


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=600))
def test_random_bytes_are_malformed(data):
    with pytest.raises(textdata.MalformedPartition):
        read_all(data)


@settings(max_examples=60, deadline=None)
@given(extra=st.binary(min_size=1, max_size=50))
def test_trailing_bytes_are_malformed(partition, extra):
    with pytest.raises(textdata.MalformedPartition, match="after the last"):
        read_all(partition + extra)


@settings(max_examples=60, deadline=None)
@given(field=st.sampled_from(["input_ids", "masked_lm_ids", "masked_lm_positions", "input_mask", "segment_ids",
                              "next_sentence_label"]),
       row=st.integers(0, 39), value=st.integers(-(2**15), 2**15 - 1))
def test_values_a_model_cannot_take_are_malformed(partition, field, row, value):
    records = np.load(io.BytesIO(partition)).copy()
    limit = {"input_ids": VOCAB, "masked_lm_ids": VOCAB, "masked_lm_positions": SEQ}.get(field)
    if limit is None:  # the uint8 flags: anything but 0 and 1
        bad = 2 + abs(value) % 254
    else:
        bad = value if not 0 <= value < limit else -1 - value
    target = records[field][row]
    if target.ndim:
        target[0] = bad
    else:
        records[field][row] = bad
    out = io.BytesIO()
    np.save(out, records)
    with pytest.raises(textdata.MalformedPartition, match=field):
        read_all(out.getvalue())


def test_another_layout_is_refused_by_its_header(partition):
    with pytest.raises(textdata.MalformedPartition, match="expected seq_len 64"):
        read_all(partition, seq=64)
    out = io.BytesIO()
    np.save(out, np.zeros((4, 4), dtype=np.int32))
    with pytest.raises(textdata.MalformedPartition, match="expected seq_len"):
        read_all(out.getvalue())
