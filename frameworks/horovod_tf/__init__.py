"""Horovod + TensorFlow 2 (Keras 3): ``hvd.DistributedGradientTape``, started by horovodrun (Gloo or
MPI controller) or mpirun. Models, data, optimizer and step are tf_mwms's (frameworks/keras_models),
so the two TensorFlow frameworks differ only in how gradients cross ranks."""

from harness.axes import Device, Precision, Storage, Strategy, Workload
from harness.framework_api import FrameworkInfo

INFO = FrameworkInfo(
    name="horovod_tf",
    title="Horovod TensorFlow",
    # srun is not offered, as for horovod_torch: without horovodrun's rendezvous, ranks under srun would
    # need SLURM's PMI to reach Open MPI, which this project does not set up.
    launchers=("horovodrun", "mpirun", "kubernetes"),
    worker_module="frameworks.horovod_tf.worker",
    requires=("horovod", "tensorflow", "keras"),  # the first is the row's framework_version
    workloads=(Workload.RESNET50, Workload.BERT),
    strategies=(Strategy.ALLREDUCE, Strategy.FP16),  # fp16: hvd.Compression.fp16
    storage=tuple(Storage),  # real data: resnet50 images through tf.data (keras_models/input_pipeline.py)
    devices=(Device.CPU,),  # the Horovod wheel is built without NCCL (tools/install_horovod.py)
    precisions=(Precision.FP32, Precision.AMP_BF16),  # Keras mixed_bfloat16 policy
    kubernetes_job="MPIJob",  # mpirun from a launcher pod (MPI controller)
)
