"""Blockwise model-update filtering, BMUF (Chen and Huo, ICASSP 2016): CNTK's block momentum learner.

Workers train locally for a block of steps, starting from the same point; then

    G(t)     = mean of the workers' models - the block's starting point   (the block's update)
    delta(t) = block_momentum * delta(t-1) + block_lr * G(t)              (filtered update)
    W(t)     = W(t-1) + delta(t)                                          (the global model)

and the next block starts from W(t), or with Nesterov block momentum from
W(t) + block_momentum * delta(t). With block_momentum 0 and block_lr 1 this is plain
model averaging (local SGD). The averaging itself is PyTorch's
``model_averaging.utils.average_parameters``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.model_averaging.utils import average_parameters
from torch.nn.utils import parameters_to_vector


def block_update(global_model: torch.Tensor, block_start: torch.Tensor, averaged: torch.Tensor,
                 delta: torch.Tensor, *, block_momentum: float, block_lr: float,
                 nesterov: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One BMUF filter step on flat parameter vectors: (new global model, new delta, next block start)."""
    block_gradient = averaged - block_start
    delta = block_momentum * delta + block_lr * block_gradient
    global_model = global_model + delta
    next_start = global_model + block_momentum * delta if nesterov else global_model
    return global_model, delta, next_start


@dataclass
class BlockMomentum:
    """Runs BMUF on a model's parameters; call :meth:`after_step` after every optimizer step."""

    model: nn.Module
    block_steps: int
    block_momentum: float
    block_lr: float
    nesterov: bool
    process_group: dist.ProcessGroup | None = None

    def __post_init__(self) -> None:
        start = parameters_to_vector(self.model.parameters()).detach().clone()
        self.global_model = start.clone()
        self.block_start = start
        self.delta = torch.zeros_like(start)
        self.local_steps = 0
        self.bytes_sent = 0  # bytes this worker handed to all_reduce

    def after_step(self) -> None:
        self.local_steps += 1
        if self.local_steps % self.block_steps == 0:
            self.sync()

    def sync(self) -> None:
        """End the block: average, filter, and move every worker to the next block's start."""
        params = list(self.model.parameters())
        average_parameters(iter(params), self.process_group)
        self.bytes_sent += sum(p.numel() * p.element_size() for p in params)
        averaged = parameters_to_vector(params).detach()
        self.global_model, self.delta, self.block_start = block_update(
            self.global_model, self.block_start, averaged, self.delta, block_momentum=self.block_momentum,
            block_lr=self.block_lr, nesterov=self.nesterov)
        self._load(self.block_start)

    def finish(self) -> None:
        """Close an unfinished block, then leave the global model (not the look-ahead) in place."""
        if self.local_steps % self.block_steps:
            self.sync()
        self._load(self.global_model)

    def _load(self, flat: torch.Tensor) -> None:
        offset = 0
        with torch.no_grad():
            for p in self.model.parameters():
                p.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
