"""The toy workload's PyTorch model module (tests/helpers/toy_workload.py names it): the MLP and its loss."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn


def build_model(options: Mapping[str, Any]) -> nn.Module:
    features, hidden, classes = int(options["features"]), int(options["hidden_size"]), int(options["classes"])
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def loss_of(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch["x"]), batch["y"])
