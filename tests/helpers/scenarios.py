"""Scenario files for tests, as TOML text: a tiny CPU sweep whose settings and matrix a test overrides."""

from __future__ import annotations

import json
from typing import Any, Mapping

TINY_SETTINGS = {"warmup_steps": 1, "measured_steps": 3, "repeats": 1, "timeout_s": 240, "device": "cpu"}
TINY_MATRIX = {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "procs_per_node": 1,
               "batch_per_worker": 2}


def toml_value(value: Any) -> str:
    """A scalar or a list of scalars as TOML (a JSON string, number or array is TOML's too; booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def tiny_scenario(name: str = "tiny", settings: Mapping[str, Any] | None = None,
                  matrix: Mapping[str, Any] | None = None, extra: str = "") -> str:
    """A ResNet-50 (tiny: 32x32) sweep on the CPU, 1 warm-up and 3 measured steps, one repeat, batch 2 on one
    torch_ddp process, with ``settings`` and ``matrix`` overriding those keys; ``extra``: further tables."""
    lines = [f"name = {toml_value(name)}", "[settings]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in {**TINY_SETTINGS, **(settings or {})}.items()]
    lines += ["[matrix]", *(f"{k} = {toml_value(v)}" for k, v in {**TINY_MATRIX, **(matrix or {})}.items())]
    return "\n".join(lines) + "\n" + extra
