"""TensorFlow's own distribution, the non-Horovod TF baseline: MultiWorkerMirroredStrategy (TF_CONFIG per
worker) for allreduce, ParameterServerStrategy with a ClusterCoordinator for ps_async (parameter_server.py)."""

from harness.contract.axes import (
    Compile,
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
    name="tf_mwms",
    title="TensorFlow MultiWorkerMirrored",
    image="rosetta/tensorflow:2.21.0",
    dockerfile="docker/tensorflow.Dockerfile",
    container_per_rank=True,  # podman: a container per rank (torch.distributed-style variables)
    # torchrun serves as a plain process launcher here: the workers meet through TF_CONFIG, not torch
    launchers=("torchrun", "mpirun", "slurm", "kubernetes", "podman", "azureml", "ray"),
    worker_module="frameworks.tf_mwms.worker",
    requires=("tensorflow", "keras"),
    workload_requires={Workload.DIGITS: ("sklearn",)},
    family="keras",
    workloads=(Workload.RESNET50, Workload.BERT, Workload.DIGITS, Workload.LLAMA,
               Workload.INCEPTION_V3, Workload.RESNET101, Workload.VGG16),
    strategies=(Strategy.ALLREDUCE, Strategy.PS_ASYNC),
    # allreduce trains the Keras models; ps_async the digits MLP (shared/keras/digits.py), the
    # time-to-accuracy workload the asynchronous strategies are compared on
    strategy_workloads={Strategy.ALLREDUCE: (Workload.RESNET50, Workload.BERT, Workload.LLAMA, Workload.INCEPTION_V3,
                                             Workload.RESNET101, Workload.VGG16),
                        Strategy.PS_ASYNC: (Workload.DIGITS,)},
    # ps_async: the coordinator, servers and workers on CPU (a GPU worker is untested here)
    strategy_devices={Strategy.PS_ASYNC: (Device.CPU,)},
    storage=tuple(Storage),  # real data: resnet50 images through tf.data (shared/keras/input_pipeline.py)
    # emulated: the real tf.data pipeline, a profiled sleep and a 1-float all-reduce per step, no model
    # (emulated_device.py)
    devices=(Device.CPU, Device.CUDA, Device.EMULATED),
    # device emulated with real gradients (emulated_gradients.py): the strategy all-reduces the model's
    # gradients in one pack after the whole backward, as its real step does, so the emulated step is the
    # passes' sleep, the strategy's own RING all-reduce over the shaped links, then the update's sleep
    emulated_exchanges=(Strategy.ALLREDUCE,),
    # TensorFlow's runtime and the packed all-reduce's copies: ResNet-50's emulated ranks peaked at 1,244 to
    # 1,375 MB (RSS, 4 ranks on 2 hosts), of which 4 x its 102 MB of gradients
    emulated_rank_base_bytes=1.0e9,
    # RING over gRPC: 8 ranks' all-reduce of ResNet-50's 102 MB kept both cores busy (99%) for 1.8 s, about
    # 4.4 ns of CPU per gradient byte a rank against the 1.1 ns assumed of gloo
    emulated_exchange_cpu_cost=4.0,
    # Keras policies (frameworks/shared/keras/runtime.py): tf32 = float32 with TensorFloat-32 on (off for
    # every other precision), amp_fp16 = mixed_float16 + LossScaleOptimizer, amp_bf16 = mixed_bfloat16;
    # tf32 and amp_fp16 need a CUDA GPU (Precision.needs_cuda): on a CPU their runs are skipped rows
    precisions=tuple(Precision),
    # The Keras ResNet is built channels-last (NHWC); TensorFlow's CPU convolutions exist only in NHWC.
    # "contiguous" is taken as the framework's own layout, which for Keras is that same NHWC: the row's
    # `layout` column says what ran (NHWC for both values here; NCHW for torch_ddp's contiguous).
    memory_formats={w: (MemoryFormat.CONTIGUOUS, MemoryFormat.CHANNELS_LAST) for w in convolutional()},
    # XLA: the rank's forward and backward pass in tf.function(jit_compile=True); the gradient exchange
    # outside it (XLA compiles no collective on CPU in TF 2.21; Horovod's ops have no XLA kernel)
    compiles=(Compile.OFF, Compile.ON),
    kubernetes_job="TFJob",  # one pod per rank, TF_CONFIG from the Training Operator
)
