"""BERT pre-training from transformers (frameworks/shared/pytorch/models.py): its own MLM + NSP loss."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from frameworks.shared.pytorch.models import build_bert


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return build_bert(options)


def loss_of(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return model(**batch).loss
