"""The checkpoint phase of a PyTorch run (``checkpoint = "single" | "sharded"`` in the storage options):
the model's real state_dict (``checkpoint_mb = 0``) or synthetic tensors of a stated size, saved to and
loaded from the run's storage backend by harness.storage.checkpoint, after the measured window. What is
PyTorch's here: the state_dict's bytes, torch.load, and torch.distributed's barrier and broadcast."""

from __future__ import annotations

import io
from typing import Any, Callable

import torch
import torch.distributed as dist

from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.storage import checkpoint


def _state_bytes(model: torch.nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


def broadcast(value: str) -> str:
    """Rank 0's ``value`` on every rank."""
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def phase(spec: RunSpec, events: EventWriter, rank: int, world: int, model: torch.nn.Module | None) -> None:
    """Save and load one checkpoint if the run asks for it; emits the rank's ``checkpoint`` record."""

    def model_state(mode: str) -> tuple[bytes, Callable[[bytes], Any]]:
        whole = _state_bytes(model)  # every rank holds the same weights: shard the serialized bytes
        part = -(-len(whole) // world)
        payload = whole if mode == "single" and rank == 0 else (b"" if mode == "single" else
                                                                whole[rank * part:(rank + 1) * part])
        decode = (lambda data: torch.load(io.BytesIO(data), weights_only=True)) if mode == "single" else len
        return payload, decode

    checkpoint.phase(spec, events, rank, world, dist.barrier, broadcast, None if model is None else model_state)
