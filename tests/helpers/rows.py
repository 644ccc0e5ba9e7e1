"""Result rows made by hand: a tiny finished run's row, any column overridden (the tables' and reports' tests)."""

from __future__ import annotations

import json
from typing import Any

from harness.results import table as results


def result_row(**overrides: Any) -> dict[str, Any]:
    """The row of an ok 1-process torch_ddp ResNet-50 (tiny) run of sweep ``s1`` at 100 samples/s, every
    dimension set, with ``overrides`` on top."""
    row = {"schema_version": results.SCHEMA_VERSION, "sweep_id": "s1", "run_id": "s1/0000", "config_id": "c1",
           "scenario": "tiny", "framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "nodes": 1,
           "procs_per_node": 1, "world_size": 1, "batch_per_worker": 2, "global_batch": 2, "strategy": "allreduce",
           "storage": "synthetic", "launcher": "torchrun", "network": "unlimited", "precision": "fp32",
           "memory_format": "contiguous", "compile": "off", "device_requested": "cpu", "device": "cpu",
           "sample_unit": "images", "repeat": 0, "status": "ok", "throughput": 100.0, "timestamp": "t0",
           "step_times_s": json.dumps([0.02, 0.021])}
    return {**row, **overrides}
