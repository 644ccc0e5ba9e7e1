"""What a PyTorch rank says about itself and where it computes: the device it resolves to, the versions
and GPU facts of its hello record (torch_ddp's and horovod_torch's)."""

from __future__ import annotations

import platform

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
