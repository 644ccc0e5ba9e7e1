"""The training pieces every PyTorch worker shares (DDP, Horovod): model, data, optimizer, loss,
all built from the equivalence contract (harness.contract.equivalence)."""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
from torch import nn

from frameworks.shared.pytorch import numerics
from harness.contract.axes import Workload
from harness.contract.equivalence import Recipe, fixed_batch, recipe
from harness.contract.spec import RunSpec
from harness.contract.workloads import DECLARATIONS

FAMILY = "pytorch"  # the builders this code imports (harness.contract.workloads.declaration.FAMILIES)


def model_module(workload: Workload) -> ModuleType:
    """The workload's PyTorch builder module (``build_model``, ``loss_of``), named by its declaration (imported
    once; later calls, one a step, find it in sys.modules)."""
    return importlib.import_module(DECLARATIONS[workload].builder(FAMILY))


def build_model(workload: Workload, options: dict[str, Any]) -> nn.Module:
    return model_module(workload).build_model(options)


def synthetic_batch(spec: RunSpec, rank: int, device: torch.device) -> dict[str, torch.Tensor]:
    """This rank's fixed batch (the same numbers in every framework), made before anything is timed."""
    batch = fixed_batch(spec.workload, spec.workload_options, spec.batch_per_worker, spec.seed * 1000 + rank)
    return {k: torch.from_numpy(v).to(device) for k, v in batch.items()}


def optimizer_from_recipe(plan: Recipe, model: nn.Module) -> torch.optim.Optimizer:
    """torch.optim's SGD (its weight_decay is coupled L2) or AdamW (decoupled) as the recipe says."""
    if plan.name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=plan.lr, momentum=plan.momentum, nesterov=plan.nesterov,
                               weight_decay=plan.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=plan.lr, betas=plan.betas, eps=plan.eps,
                             weight_decay=plan.weight_decay)


def make_optimizer(spec: RunSpec, model: nn.Module) -> torch.optim.Optimizer:
    return optimizer_from_recipe(recipe(spec.workload, spec.global_batch, spec.workload_options), model)


def optimizer_facts(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """What the optimizer object holds, in the probe's terms (read back, not copied from the recipe)."""
    group = optimizer.param_groups[0]
    if isinstance(optimizer, torch.optim.AdamW):
        return {"name": "adamw", "lr": group["lr"], "betas": list(group["betas"]), "eps": group["eps"],
                "weight_decay": group["weight_decay"], "weight_decay_mode": "decoupled"}
    if type(optimizer) is torch.optim.SGD:
        return {"name": "sgd", "lr": group["lr"], "momentum": group["momentum"], "nesterov": group["nesterov"],
                "weight_decay": group["weight_decay"], "weight_decay_mode": "l2_coupled"}
    raise TypeError(f"no probe facts for optimizer {type(optimizer).__name__}")


def loss_of(workload: Workload, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model_module(workload).loss_of(model, batch)


def dense_bytes(model: nn.Module) -> int:
    """Bytes of every trainable parameter's gradient: what fp32 allreduce sends per step."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The whole of a (possibly sharded) tensor: a DTensor is all-gathered (every rank must call)."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def weights_checksum(model: nn.Module) -> str:
    """Hash of every parameter's bytes: equal on all ranks iff their weights are identical.

    Buffers are left out on purpose: BatchNorm running statistics are updated from each
    rank's own batch after DDP last broadcast them, so they legitimately differ.
    """
    digest = hashlib.blake2b(digest_size=16)
    for tensor in model.parameters():
        digest.update(full_tensor(tensor.detach()).cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def training_step(spec: RunSpec, model: nn.Module, optimizer: torch.optim.Optimizer, device_kind: str,
                  next_batch: Callable[[], dict[str, torch.Tensor]],
                  after: Callable[[], None] = lambda: None) -> Callable[[], torch.Tensor]:
    """One training step under the run's numerics (autocast, loss scaling), then ``after`` (a
    strategy's own work); returns the detached loss, read only after the window."""
    scaler = numerics.grad_scaler(spec, device_kind)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with numerics.autocast(spec, device_kind):
            loss = loss_of(spec.workload, model, next_batch())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        after()
        return loss.detach()

    return step
