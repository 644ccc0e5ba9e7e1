"""Prints, as one JSON line, which torch.distributed backends this environment offers.

Run by the harness in a subprocess (``python -m frameworks.torch_ddp.comm_benchmark.available_backends``), so
that the harness itself never imports torch.
"""

import json

import torch
import torch.distributed as dist

if __name__ == "__main__":
    cuda = torch.cuda.is_available()
    print(json.dumps({"torch": torch.__version__, "gloo": dist.is_gloo_available(),
                      "nccl": dist.is_nccl_available(), "mpi": dist.is_mpi_available(),
                      "cuda": cuda, "gpu_count": torch.cuda.device_count() if cuda else 0}))
