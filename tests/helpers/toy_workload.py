"""A toy workload, declared the way a new one is: this declaration, a model module per family
(tests/helpers/toy_workload_torch.py for PyTorch) and a registry line (the test adds the line itself).

A two-layer MLP on 16 standard-normal features and 4 classes; imports no framework (the harness reads it).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Mapping

import numpy as np

from harness.contract.axes import Size
from harness.contract.workloads.declaration import Recipe, WorkloadInfo, dense_record


class Toy(str, Enum):
    """The toy's name, a str-Enum member as the built-in workloads' (``.value`` is what a row says)."""

    MLP = "toy_mlp"


PRESETS = {Size.TINY: {"features": 16, "hidden_size": 8, "classes": 4}}


def recipe(global_batch: int, options: Mapping[str, Any]) -> Recipe:
    """Plain SGD, lr 0.1."""
    return Recipe("sgd", lr=0.1, momentum=0.0, nesterov=False, weight_decay=0.0, weight_decay_mode="l2_coupled")


def batch(options: Mapping[str, Any], n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((n, int(options["features"])), dtype=np.float32),
            "y": rng.integers(0, int(options["classes"]), n, dtype=np.int64)}


def layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    features, hidden, classes = int(options["features"]), int(options["hidden_size"]), int(options["classes"])
    return [dense_record(features, hidden, 1), dense_record(hidden, classes, 1)]


DECLARATION = WorkloadInfo(Toy.MLP, "toy MLP (a test's workload)", "images", PRESETS, recipe=recipe, layers=layers,
                           batch=batch, builders={"pytorch": "tests.helpers.toy_workload_torch"})
