"""PyTorch DistributedDataParallel: gloo on CPU, NCCL on GPU, launched by torchrun.

worker.py is the entry point, training_loop.py the loop, strategies/ the strategies (one module each);
the models, data and numerics are frameworks/shared/pytorch/, shared with horovod_torch; comm_benchmark/
is the collective microbenchmark's rank side."""

from harness.contract.axes import (
    Compile,
    Device,
    MemoryFormat,
    Precision,
    Reduction,
    Storage,
    Strategy,
    Workload,
)
from harness.contract.framework_api import FrameworkInfo
from harness.contract.workloads import convolutional

INFO = FrameworkInfo(
    name="torch_ddp",
    title="PyTorch DDP",
    image="rosetta/torch:2.13.0",
    dockerfile="docker/torch.Dockerfile",
    container_per_rank=True,  # podman: a container per rank (torch.distributed-style variables)
    launchers=("torchrun", "mpirun", "slurm", "kubernetes", "podman", "azureml", "ray", "spark"),
    worker_module="frameworks.torch_ddp.worker",
    requires=("torch",),
    workload_requires={Workload.BERT: ("transformers",), Workload.DIGITS: ("sklearn",)},
    family="pytorch",
    workloads=(Workload.RESNET50, Workload.BERT, Workload.DIGITS, Workload.LLAMA,
               Workload.INCEPTION_V3, Workload.RESNET101, Workload.VGG16),
    # DDP communication hooks and torch.distributed.algorithms building blocks (strategies/wrapping.py)
    strategies=(Strategy.ALLREDUCE, Strategy.ONEBIT, Strategy.BMUF, Strategy.LOCAL_SGD, Strategy.FP16,
                Strategy.BF16, Strategy.POWERSGD,
                # no DDP (strategies/async_training.py): parameter servers over torch.distributed.rpc, Hogwild
                Strategy.PS_SYNC, Strategy.PS_ASYNC, Strategy.HOGWILD, Strategy.HOGWILD_LOCKED,
                Strategy.HIERARCHICAL,  # hierarchical.py: reduce-scatter, inter-host allreduce, allgather
                Strategy.FSDP,  # fsdp.py: FSDP2 fully_shard
                Strategy.PIPELINE,  # pipeline_parallel.py: one stage per rank, GPipe or 1F1B
                Strategy.TENSOR_PARALLEL,  # tensor_parallel.py: BERT's and Llama's attention and MLP split across ranks
                Strategy.HYBRID,  # hybrid.py: data-parallel trunk, the classifier's classes split across ranks
                ),
    # BERT and the Llama decoder are not cut into stages (the stages hand on one tensor; their layers take more)
    strategy_workloads={Strategy.PIPELINE: (Workload.RESNET50, Workload.DIGITS),
                        Strategy.TENSOR_PARALLEL: (Workload.BERT, Workload.LLAMA),
                        # a convolutional trunk and one linear classifier: ResNet-50 (digits is an MLP)
                        Strategy.HYBRID: (Workload.RESNET50,)},
    # bf16_compress_hook needs NCCL (>= 2.10) on CUDA; gloo on CPU has no bf16 allreduce path here.
    strategy_devices={Strategy.BF16: (Device.CUDA,),
                      # CPU tensors: TensorPipe's CPU path; one model in a host's shared memory
                      # (a server's workers may be emulated accelerators, whose gradients it takes)
                      Strategy.PS_SYNC: (Device.CPU, Device.EMULATED),
                      Strategy.PS_ASYNC: (Device.CPU, Device.EMULATED),
                      Strategy.HOGWILD: (Device.CPU,), Strategy.HOGWILD_LOCKED: (Device.CPU,)},
    # real data: resnet50 images (files or tar shards), bert token partitions (shared/pytorch/input_pipeline.py)
    storage=tuple(Storage),
    # emulated: the real loader, a profiled sleep (shared/pytorch/emulated_device.py)
    devices=(Device.CPU, Device.CUDA, Device.EMULATED),
    precisions=tuple(Precision),
    memory_formats={w: (MemoryFormat.CONTIGUOUS, MemoryFormat.CHANNELS_LAST) for w in convolutional()},
    compiles=(Compile.OFF, Compile.ON),
    # device emulated with real gradients (shared/pytorch/emulated_gradients.py): the DDP wrappers, whose
    # hooks see the emulated backward's gradients as a real one's, and the parameter servers (synchronous
    # and Downpour's), which take them after the backward, and FSDP, whose collectives wrap each unit's
    # emulated layers (not tensor or pipeline parallelism, whose exchange is inside the layers' math)
    emulated_exchanges=(Strategy.ALLREDUCE, Strategy.ONEBIT, Strategy.FP16, Strategy.POWERSGD,
                        Strategy.HIERARCHICAL, Strategy.LOCAL_SGD, Strategy.BMUF, Strategy.PS_SYNC,
                        Strategy.PS_ASYNC,
                        # FSDP2 over the emulated layers: each unit's all-gather before its layers and its
                        # reduce-scatter after their backward, FSDP's own, timed (shared/pytorch/emulated_fsdp.py)
                        Strategy.FSDP),
    # a process for G GPUs of its host (their in-host reduction timed from the intra link, the reducer's
    # allreduce across the host processes real) and gradients 1/s of their size over links s times slower:
    # the DDP allreduce only (shared/pytorch/emulated_host.py)
    emulated_reductions=(Reduction.GPUS_PER_RANK, Reduction.GRADIENT_SCALE),
    # and FSDP's all-gathers and reduce-scatters of 1/s of the parameters, the in-host part timed alike
    emulated_reduction_strategies=(Strategy.ALLREDUCE, Strategy.FSDP),
)
