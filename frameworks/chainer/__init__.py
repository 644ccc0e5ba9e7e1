"""Chainer + ChainerMN: the `naive` MPI communicator on CPU (`pure_nccl` on GPU), launched by mpirun.

Chainer 7.8.1 is the last release (2020). ResNet-50 only: no BERT is written in Chainer,
so BERT runs are recorded as skipped with that reason.
"""

from harness.contract.axes import Device, Storage, Strategy, Workload
from harness.contract.framework_api import FrameworkInfo

INFO = FrameworkInfo(
    name="chainer",
    title="Chainer + ChainerMN",
    image="rosetta/chainer:7.8.1",
    dockerfile="docker/chainer.Dockerfile",  # CPU only: no CuPy for Chainer 7.8.1 today
    launchers=("mpirun", "slurm", "kubernetes", "podman", "azureml"),
    kubernetes_job="MPIJob",  # mpirun from a launcher pod over sshd worker pods, as mpiexec runs it here
    worker_module="frameworks.chainer.worker",
    requires=("chainer", "mpi4py"),
    family="chainer",
    workloads=(Workload.RESNET50,),
    strategies=(Strategy.ALLREDUCE,),  # ChainerMN's multi-node optimizer: mean gradient every step
    storage=tuple(Storage),  # real data: resnet50 images through a MultiprocessIterator (input_pipeline.py)
    # cuda needs CuPy 7 (Chainer 7.8.1's range), which has no build for current CUDA and Python 3.11:
    # declared for completeness, the worker says why when CuPy is missing
    # emulated: the real iterator, a profiled sleep and an MPI barrier per step, no model (emulated_device.py)
    devices=(Device.CPU, Device.CUDA, Device.EMULATED),
    # device emulated with real gradients (emulated_gradients.py): the multi-node optimizer averages the
    # gradients after the whole backward, so the emulated step is the passes' sleep, the communicator's own
    # MPI allreduces over the shaped links, then the update's sleep
    emulated_exchanges=(Strategy.ALLREDUCE,),
)
