"""The digits MLP (frameworks/shared/pytorch/digits.py) and its loss: mean softmax cross-entropy."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from frameworks.shared.pytorch import digits


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return digits.build_model(options)


def loss_of(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch["x"]), batch["y"])
