"""ResNet-101 v1.5 (frameworks/shared/pytorch/models.py's ResNet with 3, 4, 23, 3 bottlenecks a stage) and its
loss: mean softmax cross-entropy, ResNet-50's."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from frameworks.shared.pytorch.models import ResNet50
from frameworks.shared.pytorch.workloads import resnet50
from harness.contract.workloads.resnet101 import BLOCKS


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return ResNet50(options["num_classes"], BLOCKS)


def loss_of(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return resnet50.loss_of(model, batch)
