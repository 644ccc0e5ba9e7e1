"""What a PyTorch rank says about itself and where it computes: the device it resolves to, the versions
and GPU facts of its hello record (torch_ddp's and horovod_torch's)."""

from __future__ import annotations

import platform
from typing import Callable

import torch

from harness.contract.axes import Device


def resolve_device(requested: Device) -> str:
    """"cpu" or "cuda" for the run's device (auto: a GPU where torch sees one); cuda without one raises."""
    if requested == Device.CUDA and not torch.cuda.is_available():
        raise RuntimeError("device cuda requested but torch.cuda.is_available() is False")
    if requested == Device.CPU or not torch.cuda.is_available():
        return "cpu"
    return "cuda"


def versions() -> dict[str, str]:
    found = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import transformers

        found["transformers"] = transformers.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        found["cuda"] = str(torch.version.cuda)
        found["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        found["cudnn"] = str(torch.backends.cudnn.version())
    return found


def gpu_facts(device: str) -> dict[str, str | None]:
    if device != "cuda":
        return {"gpu_model": None, "gpu_count": 0}
    return {"gpu_model": torch.cuda.get_device_name(), "gpu_count": torch.cuda.device_count()}


def device_memory(device_kind: str) -> Callable[[], dict[str, float]] | None:
    """What the rank's ``memory`` record says (run_measured_loop's ``device_memory``): the most GPU memory
    PyTorch's caching allocator had allocated to tensors and had reserved from the device (MiB); None on a CPU."""
    if device_kind != "cuda":
        return None
    return lambda: {"gpu_allocated_mb": torch.cuda.max_memory_allocated() / 2**20,
                    "gpu_reserved_mb": torch.cuda.max_memory_reserved() / 2**20}
