"""Horovod + PyTorch: ``hvd.DistributedOptimizer`` (Gloo collectives on CPU, NCCL on GPUs), started by horovodrun with
its Gloo or MPI controller, or by mpirun. The models, data and optimizer are PyTorch DDP's
(frameworks/torch_ddp), so the two differ only in how gradients are exchanged."""

from harness.contract.axes import (
    Device,
    MemoryFormat,
    Precision,
    Storage,
    Strategy,
    Workload,
)
from harness.contract.framework_api import FrameworkInfo
from harness.contract.workloads import convolutional

INFO = FrameworkInfo(
    name="horovod_torch",
    title="Horovod PyTorch",
    image="rosetta/horovod:0.28.1",
    dockerfile="docker/horovod.Dockerfile",  # torch + TensorFlow + Horovod with NCCL
    # kubernetes: an MPIJob (mpirun from a launcher pod; the image needs Horovod: tools/install_horovod.py).
    # slurm: srun starts the ranks, Horovod's MPI controller joins them through PMIx (SLURM_MPI_TYPE=pmix;
    # a Horovod built without MPI cannot join ranks that horovodrun did not start).
    launchers=("horovodrun", "mpirun", "slurm", "kubernetes", "podman", "azureml", "ray"),
    kubernetes_job="MPIJob",
    worker_module="frameworks.horovod_torch.worker",
    requires=("horovod", "torch"),  # the first is the row's framework_version
    workload_requires={Workload.BERT: ("transformers",), Workload.DIGITS: ("sklearn",)},
    family="pytorch",
    workloads=(Workload.RESNET50, Workload.BERT, Workload.DIGITS, Workload.LLAMA,
               Workload.INCEPTION_V3, Workload.RESNET101, Workload.VGG16),
    strategies=(Strategy.ALLREDUCE, Strategy.FP16),  # fp16: hvd.Compression.fp16
    # real data: PyTorch's DataLoader (shared/pytorch/input_pipeline.py): images and bert partitions
    storage=tuple(Storage),
    # cuda: one GPU per rank (its local rank's), NCCL operations where the wheel has them (tools/install_horovod.py
    # builds them where it finds a CUDA toolkit and NCCL; docker/horovod.Dockerfile does); a wheel without NCCL
    # on a GPU node makes the run a skipped row saying so. emulated: PyTorch's DataLoader, a profiled sleep
    # and hvd.barrier() per step, no model (shared/pytorch/emulated_device.py)
    devices=(Device.CPU, Device.CUDA, Device.EMULATED),
    # the PyTorch numerics (frameworks/shared/pytorch/numerics.py): autocast, float16's loss scaling in
    # Horovod's order (distributed.scaled_step), channels-last ResNet (its gradients copied to contiguous
    # ones for Horovod's allreduce); tf32 and amp_fp16 need a GPU (Precision.needs_cuda). torch.compile is
    # left out: Horovod's DistributedOptimizer hooks every parameter's gradient accumulator during backward.
    precisions=tuple(Precision),
    memory_formats={w: (MemoryFormat.CONTIGUOUS, MemoryFormat.CHANNELS_LAST) for w in convolutional()},
    # device emulated with real gradients (shared/pytorch/emulated_gradients.py): Horovod's hooks, fusion
    # buffer and cycle time see the emulated backward's gradients as a real one's
    emulated_exchanges=(Strategy.ALLREDUCE, Strategy.FP16),
)
