"""ResNet-50 v1.5 (frameworks/shared/pytorch/models.py) and its loss: mean softmax cross-entropy."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from frameworks.shared.pytorch.models import ResNet50


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return ResNet50(options["num_classes"])


def loss_of(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch["images"]), batch["labels"])
