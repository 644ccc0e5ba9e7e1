"""A run and what every launcher gets for it, built without a scenario: for the launchers' tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import frameworks
from harness.contract.axes import Device, Size, Storage, Strategy, Workload
from harness.contract.spec import RunSpec
from harness.launchers import LaunchRequest

SPEC_FILE = Path("/res/runs/S1/0007/spec.json")  # a run's folder in a results folder: <results>/runs/<sweep>/<run>


def run_spec(**overrides: Any) -> RunSpec:
    """A tiny torch_ddp ResNet-50 run on 2 CPU processes of one node, with ``overrides``."""
    base = dict(scenario="t", framework="torch_ddp", workload=Workload.RESNET50, size=Size.TINY,
                workload_options={"image_size": 32, "num_classes": 1000}, nodes=1, procs_per_node=2,
                batch_per_worker=4, strategy=Strategy.ALLREDUCE, storage=Storage.SYNTHETIC, repeat=0,
                warmup_steps=1, measured_steps=3, timeout_s=60.0, device=Device.CPU, seed=0)
    return RunSpec(**{**base, **overrides})


def launch_request(spec: RunSpec, *, worker_module: str | None = None, spec_file: Path = SPEC_FILE,
                   python: str = "/venv/bin/python", cpu_count: int = 8,
                   repo_root: Path = Path("/repo"), worker_python: str = "") -> LaunchRequest:
    """What a launcher gets for ``spec``: by default its framework's worker, a 8-core machine, paths that are
    nobody's (the launchers only name them)."""
    worker = worker_module or frameworks.get(spec.framework).worker_module
    return LaunchRequest(spec, worker, spec_file, python, cpu_count=cpu_count, repo_root=repo_root,
                         worker_python=worker_python)
