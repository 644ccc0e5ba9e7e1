import textwrap
from pathlib import Path

import pytest

TINY = """
name = "tiny"
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
procs_per_node = [1, 2]
batch_per_worker = 2
"""


@pytest.fixture
def write_scenario(tmp_path: Path):
    """Write a scenario file from TOML text and return its path."""

    def write(text: str, name: str = "scenario.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture(scope="module")
def image_files(tmp_path_factory):
    """12 small JPEGs in 3 classes, one file each (rosetta data make's files layout), per test module."""
    from harness import datagen

    root = tmp_path_factory.mktemp("imagenet")
    datagen.make(datagen.parse_spec({"count": 12, "classes": 3, "min_kb": 5, "max_kb": 20, "layout": "files"},
                                    "test"), root)
    return root
