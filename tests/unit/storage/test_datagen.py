"""`rosetta data make`: real JPEGs, deterministic from the seed, manifest checksums that match the bytes."""

import hashlib
import io
import json
import tarfile

import pytest
from PIL import Image

from harness.base.errors import UserError
from harness.cli.main import main
from harness.storage import datagen


def test_make_writes_decodable_jpegs_matching_the_manifest(tmp_path):
    assert main(["data", "make", str(tmp_path / "d"), "--count", "12", "--classes", "3",
                 "--shard-samples", "5"]) == 0
    manifest = json.loads((tmp_path / "d" / datagen.MANIFEST).read_text())
    assert manifest["format"] == datagen.MANIFEST_FORMAT
    assert len(manifest["samples"]) == 12 and len(manifest["objects"]) == 12 + 3  # 3 shards of <= 5
    for obj in manifest["objects"]:
        data = (tmp_path / "d" / obj["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == obj["sha256"] and len(data) == obj["bytes"]
    for sample in manifest["samples"]:
        assert f"/n{sample['label']:08d}/" in sample["file"]
        image = Image.open(tmp_path / "d" / sample["file"])
        assert image.format == "JPEG" and image.mode == "RGB"
        assert 20_000 < sample["bytes"] < 300_000  # aimed at 50-200 KB
    with tarfile.open(tmp_path / "d" / "shards" / "train-000000.tar") as tar:
        names = tar.getnames()
        assert names[:2] == ["00000000.jpg", "00000000.cls"]
        jpeg = tar.extractfile("00000000.jpg").read()
    assert hashlib.sha256(jpeg).hexdigest() == manifest["samples"][0]["sha256"]
    Image.open(io.BytesIO(jpeg)).load()


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    spec = datagen.parse_spec({"count": 4, "layout": "shards", "shard_samples": 4}, "t")
    a = datagen.make(spec, tmp_path / "a")
    b = datagen.make(spec, tmp_path / "b")
    c = datagen.make(datagen.parse_spec({"count": 4, "layout": "shards", "shard_samples": 4, "seed": 1}, "t"),
                     tmp_path / "c")
    assert a["objects"] == b["objects"]
    assert (tmp_path / "a/shards/train-000000.tar").read_bytes() == (tmp_path / "b/shards/train-000000.tar").read_bytes()
    assert a["objects"][0]["sha256"] != c["objects"][0]["sha256"]


def test_sizes_spread_over_the_range():
    spec = datagen.parse_spec({"count": 40}, "t")
    sizes = sorted(len(datagen.make_jpeg(spec, i)[0]) for i in range(40))
    assert sizes[-1] > 2 * sizes[0]  # a spread, not one size


@pytest.mark.parametrize("table, key", [({"cout": 3}, "cout"), ({"layout": "zip"}, "layout"),
                                        ({"min_kb": 300}, "min_kb"), ({"count": 0}, "count")])
def test_bad_specs_are_one_line_errors(table, key):
    with pytest.raises(UserError, match=key):
        datagen.parse_spec(table, "spec.toml")


def test_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "x").write_text("")
    with pytest.raises(UserError, match="not empty"):
        datagen.make(datagen.parse_spec({"count": 1}, "t"), tmp_path)
