"""TensorFlow's own MultiWorkerMirroredStrategy (TF_CONFIG per worker), the non-Horovod TF baseline."""

from harness.axes import Device, Precision, Storage, Strategy, Workload
from harness.framework_api import FrameworkInfo

INFO = FrameworkInfo(
    name="tf_mwms",
    title="TensorFlow MultiWorkerMirrored",
    # torchrun serves as a plain process launcher here: the workers meet through TF_CONFIG, not torch
    launchers=("torchrun", "mpirun", "slurm", "kubernetes"),
    worker_module="frameworks.tf_mwms.worker",
    requires=("tensorflow", "keras"),
    workloads=(Workload.RESNET50, Workload.BERT),
    strategies=(Strategy.ALLREDUCE,),
    storage=tuple(Storage),  # real data: resnet50 images through tf.data (keras_models/input_pipeline.py)
    devices=(Device.CPU, Device.CUDA),
    precisions=(Precision.FP32, Precision.AMP_BF16),  # Keras mixed_bfloat16 policy
    kubernetes_job="TFJob",  # one pod per rank, TF_CONFIG from the Training Operator
)
