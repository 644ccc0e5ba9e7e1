"""Horovod + TensorFlow 2 (Keras 3): ``hvd.DistributedGradientTape``, started by horovodrun (Gloo or
MPI controller) or mpirun. Models, data, optimizer and step are tf_mwms's (frameworks/shared/keras),
so the two TensorFlow frameworks differ only in how gradients cross ranks."""

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
    name="horovod_tf",
    title="Horovod TensorFlow",
    image="rosetta/horovod:0.28.1",
    dockerfile="docker/horovod.Dockerfile",  # torch + TensorFlow + Horovod with NCCL
    # slurm: as for horovod_torch, the MPI controller joins srun's ranks through PMIx (SLURM_MPI_TYPE=pmix)
    launchers=("horovodrun", "mpirun", "slurm", "kubernetes", "podman", "azureml", "ray"),
    worker_module="frameworks.horovod_tf.worker",
    requires=("horovod", "tensorflow", "keras"),  # the first is the row's framework_version
    family="keras",
    workloads=(Workload.RESNET50, Workload.BERT, Workload.LLAMA,
               Workload.INCEPTION_V3, Workload.RESNET101, Workload.VGG16),
    strategies=(Strategy.ALLREDUCE, Strategy.FP16),  # fp16: hvd.Compression.fp16
    storage=tuple(Storage),  # real data: resnet50 images through tf.data (shared/keras/input_pipeline.py)
    # cuda: each rank sees its local rank's GPU, NCCL operations where the wheel has them (tools/install_horovod.py
    # builds them where it finds a CUDA toolkit and NCCL; docker/horovod.Dockerfile does, with TensorFlow's CUDA
    # build); a wheel without NCCL on a GPU node makes the run a skipped row saying so. emulated: the shared
    # tf.data pipeline, a profiled sleep and a 1-float hvd.allreduce per step, no model (shared/keras/emulated_device.py)
    devices=(Device.CPU, Device.CUDA, Device.EMULATED),
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
    kubernetes_job="MPIJob",  # mpirun from a launcher pod (MPI controller)
    # device emulated with real gradients (emulated_gradients.py): each variable's gradient made at its
    # layer's backward time inside the tf.function, DistributedGradientTape's allreduce of it started then;
    # every workload (its layers' FLOPs matched to the Keras variables by shape: model_flops.shares_by_shape)
    emulated_exchanges=(Strategy.ALLREDUCE, Strategy.FP16),
    emulated_rank_base_bytes=1.0e9,  # TensorFlow's runtime, as tf_mwms's
)
