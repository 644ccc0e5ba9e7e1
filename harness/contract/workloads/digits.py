"""Time-to-accuracy: an MLP on scikit-learn's 8x8 handwritten digits (1,797 images, real data that ships inside
the package). A fixed 20% of the images is held out and never trained on; every ``eval_every`` steps the whole
held-out set is evaluated. ``target_accuracy`` is a fraction."""

from __future__ import annotations

from typing import Any, Mapping

from harness.contract.axes import Size, Workload
from harness.contract.workloads.declaration import Recipe, WorkloadInfo, dense_record

_BASE = {"hidden_size": 64, "lr": 0.2, "momentum": 0.0, "eval_every": 10, "target_accuracy": 0.93}
PRESETS = {
    Size.TINY: {**_BASE, "hidden_size": 32},
    Size.SMALL: _BASE,
    Size.FULL: {**_BASE, "hidden_size": 256},
}
FEATURES, CLASSES = 64, 10  # 8x8 images, 10 digits


def recipe(global_batch: int, options: Mapping[str, Any]) -> Recipe:
    """Plain SGD from its options (lr, momentum), no weight decay."""
    return Recipe("sgd", lr=float(options.get("lr", 0.2)), momentum=float(options.get("momentum", 0.0)),
                  nesterov=False, weight_decay=0.0, weight_decay_mode="l2_coupled")


def layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """64 pixels, two hidden layers, 10 classes."""
    hidden = int(options["hidden_size"])
    return [dense_record(FEATURES, hidden, 1), dense_record(hidden, hidden, 1), dense_record(hidden, CLASSES, 1)]


# no fixed synthetic batch: it trains on the digits themselves (frameworks' digits modules read them)
DECLARATION = WorkloadInfo(
    Workload.DIGITS, "MLP on scikit-learn digits (time-to-accuracy)", "images", PRESETS, recipe=recipe,
    layers=layers, builders={"pytorch": "frameworks.shared.pytorch.workloads.digits",
                             "keras": "frameworks.shared.keras.workloads.digits"})
