"""PyTorch DistributedDataParallel: gloo on CPU, NCCL on GPU, launched by torchrun."""

from harness.axes import Device, Storage, Strategy, Workload
from harness.framework_api import FrameworkInfo

INFO = FrameworkInfo(
    name="torch_ddp",
    title="PyTorch DDP",
    launchers=("torchrun", "mpirun", "slurm", "kubernetes"),
    worker_module="frameworks.torch_ddp.worker",
    requires=("torch",),
    workload_requires={Workload.BERT: ("transformers",)},
    workloads=(Workload.RESNET50, Workload.BERT),
    strategies=(Strategy.ALLREDUCE,),
    storage=(Storage.SYNTHETIC,),
    devices=(Device.CPU, Device.CUDA),
)
