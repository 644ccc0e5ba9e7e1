"""Sharded data parallelism with FSDP2 (``torch.distributed.fsdp.fully_shard``).

Every rank keeps 1/world of each parameter, gradient and optimizer state (dim-0 shards, DTensors);
a unit's parameters are all-gathered before its forward (and again before its backward when it
resharded after forward), its gradients reduce-scattered after its backward. The units are
ResNet-50's bottleneck blocks, BERT's encoder layers and the Llama decoder's layers, then the root (everything else); the
digits MLP is one unit. ``tests/runs/test_model_parallel_dist.py`` checks the gradients against one
process on the whole batch, since pytorch#162338 ("incorrect AVG reduction for GLOO") was a silent
wrong-gradient bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

UNIT_CLASSES = ("Bottleneck", "BertLayer", "LlamaBlock")  # sharded as units of their own, by class name


@dataclass
class ShardedBytes:
    """Payload this rank hands to FSDP's collectives per step, from the shards' sizes:
    every unit all-gathers its shard (once, or twice when it reshards after forward) and
    reduce-scatters its whole padded gradient."""

    per_step: int
    bytes_sent: int = 0

    def after_step(self) -> None:
        self.bytes_sent += self.per_step


def unit_bytes(params: list[nn.Parameter], world: int, gathers: int, gathered_size: int | None = None) -> int:
    """One unit's bytes per step: ``gathers`` all-gathers of the local shard (``gathered_size`` bytes an element:
    a mixed-precision policy's; default the parameter's) plus the reduce-scatter of the padded whole (dim 0
    padded to a multiple of ``world``)."""
    total = 0
    for p in params:
        rows = p.shape[0] if p.dim() else 1
        padded_rows = -(-rows // world) * world
        elements = padded_rows * (p.numel() // max(rows, 1))
        total += gathers * elements * (gathered_size or p.element_size()) // world + elements * p.element_size()
    return total


def _units(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if type(m).__name__ in UNIT_CLASSES]


def _per_step(model: nn.Module, units: list[nn.Module], world: int, reshard_after_forward: bool,
              gathered_size: int | None = None) -> int:
    """Bytes a rank hands FSDP's collectives a step (ShardedBytes), counted before the parameters are sharded:
    fully_shard replaces a unit's parameters, which the root would then count again."""
    in_units = {id(p) for unit in units for p in unit.parameters()}
    per_step = sum(unit_bytes(list(unit.parameters()), world, 2 if reshard_after_forward else 1, gathered_size)
                   for unit in units)
    # FSDP2 keeps the root gathered from forward to backward
    return per_step + unit_bytes([p for p in model.parameters() if id(p) not in in_units], world, 1, gathered_size)


def shard(model: nn.Module, reshard_after_forward: bool, device_type: str) -> ShardedBytes:
    """Apply ``fully_shard`` to the units, then the root, in place; the bytes counter."""
    world = dist.get_world_size()
    mesh = init_device_mesh(device_type, (world,))
    units = _units(model)
    per_step = _per_step(model, units, world, reshard_after_forward)
    for unit in units:
        fully_shard(unit, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    return ShardedBytes(per_step)


def shard_emulated(model: nn.Module, reshard_after_forward: bool, precision: str, emulation: dict[str, Any],
                   nodes: int) -> ShardedBytes:
    """An emulated rank's model (emulated_gradients.EmulatedModel) sharded by the same units, its collectives
    timed on the emulated cluster (frameworks/shared/pytorch/emulated_fsdp.py); the bytes counter (of the
    parameters as the rank holds them: 1/gradient_scale of the full size's)."""
    from frameworks.shared.pytorch import emulated_fsdp

    units = _units(model)
    gathered = emulated_fsdp.GATHERED_DTYPE.get(precision)
    per_step = _per_step(model, units, dist.get_world_size(), reshard_after_forward,
                         gathered.itemsize if gathered is not None else None)
    emulated_fsdp.shard(model, units, reshard_after_forward, precision, emulation, nodes)
    return ShardedBytes(per_step)
