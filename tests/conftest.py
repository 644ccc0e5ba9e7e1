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
