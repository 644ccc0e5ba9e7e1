"""Precision, memory format and compilation of the PyTorch training step, as the scenario asks."""

from __future__ import annotations

import contextlib
from typing import ContextManager

import torch
from torch import nn

from harness.contract.axes import Compile, MemoryFormat, Precision
from harness.contract.spec import RunSpec

AUTOCAST_DTYPES = {Precision.AMP_FP16: torch.float16, Precision.AMP_BF16: torch.bfloat16}


def check_device(spec: RunSpec, device_kind: str) -> None:
    """GPU-only precisions fail loudly on a CPU (device auto found no GPU)."""
    if spec.precision.needs_cuda and device_kind != "cuda":
        raise RuntimeError(f"precision {spec.precision.value} needs a CUDA GPU; none found")


def set_matmul_precision(spec: RunSpec) -> None:
    """TF32 on only when asked: fp32 means fp32 (PyTorch's cuDNN default would allow TF32)."""
    tf32 = spec.precision == Precision.TF32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def autocast(spec: RunSpec, device_kind: str) -> ContextManager:
    dtype = AUTOCAST_DTYPES.get(spec.precision)
    return torch.autocast(device_kind, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def grad_scaler(spec: RunSpec, device_kind: str) -> torch.amp.GradScaler:
    """Loss scaling for float16 (bfloat16 has fp32's range and needs none); a no-op otherwise."""
    return torch.amp.GradScaler(device_kind, enabled=spec.precision == Precision.AMP_FP16)


def to_memory_format(spec: RunSpec, model: nn.Module) -> nn.Module:
    if spec.memory_format == MemoryFormat.CHANNELS_LAST:
        return model.to(memory_format=torch.channels_last)
    return model


def batch_to_memory_format(spec: RunSpec, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if spec.memory_format == MemoryFormat.CHANNELS_LAST:
        return {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v for k, v in batch.items()}
    return batch


def maybe_compile(spec: RunSpec, module: nn.Module) -> nn.Module:
    """torch.compile of the DDP-wrapped model (DDP's optimizer splits graphs at bucket boundaries)."""
    return torch.compile(module) if spec.compile == Compile.ON else module


def image_layout(model: nn.Module) -> str | None:
    """The layout the convolutions' weights are in, read back: "NHWC" (channels_last) or "NCHW";
    None for a model without convolutions."""
    conv = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if conv is None:
        return None
    return "NHWC" if conv.weight.is_contiguous(memory_format=torch.channels_last) and \
        not conv.weight.is_contiguous() else "NCHW"
