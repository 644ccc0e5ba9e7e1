"""The Llama-style decoder (frameworks/shared/pytorch/llama.py) and its causal language-model loss."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from frameworks.shared.pytorch.llama import Llama, causal_lm_loss


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return Llama(options)


def loss_of(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return causal_lm_loss(model(batch["input_ids"]), batch["input_ids"])
