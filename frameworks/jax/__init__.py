"""JAX with Flax and Optax: data parallel across processes joined by ``jax.distributed`` (Gloo's collectives on
CPU), one ``shard_map`` step over every process's device, launched by mpirun, in its own Python environment
(tools/envs/jax.txt: JAX needs NumPy 2, which Chainer in .venv cannot have).

worker.py is the entry point, runtime.py the process (XLA's flags, the distributed join, versions), training.py
the optimizer, step and checksum, mesh.py strategy mesh (a data x model mesh), workloads/ the models in Flax
(ResNet-50 v1.5, BERT pre-training, the Llama decoder), probe.py the equivalence probe.
"""

from harness.contract.axes import Compile, Device, Storage, Strategy, Workload
from harness.contract.framework_api import FrameworkInfo

INFO = FrameworkInfo(
    name="jax",
    title="JAX (Flax + Optax)",
    image="rosetta/jax:0.10.2",
    dockerfile="docker/jax.Dockerfile",
    # mpirun: one process per rank, the rank and a free port for jax.distributed's coordinator from its variables
    # (torchrun's MASTER_PORT is its own agent's store)
    launchers=("mpirun",),
    worker_module="frameworks.jax.worker",
    requires=("jax", "flax", "optax"),
    family="jax",
    environment="jax",
    workloads=(Workload.RESNET50, Workload.BERT, Workload.LLAMA),
    # allreduce: the mean gradient every step (lax.pmean inside the shard_map); mesh: a data x model mesh, the
    # state sharded along the model axis (mesh.py)
    strategies=(Strategy.ALLREDUCE, Strategy.MESH),
    storage=(Storage.SYNTHETIC,),  # the fixed batch only: no JAX input pipeline yet
    devices=(Device.CPU,),  # the environment has no CUDA plugin (jax[cuda12]) yet
    # XLA compiles the step whatever compile says (JAX has no eager training loop to compare): the compilation is
    # timed apart, before the window, in the row's compile_s
    compiles=(Compile.OFF, Compile.ON),
)
