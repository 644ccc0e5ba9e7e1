"""What a framework sub-package declares about itself, as data (TorchBench style).

Each ``frameworks/<name>/__init__.py`` defines ``INFO = FrameworkInfo(...)``
without importing its deep-learning framework, so the harness can list, plan
and skip runs without installing anything.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any, Mapping

from harness.base import python_envs
from harness.contract.axes import (
    Compile,
    Device,
    MemoryFormat,
    Precision,
    Reduction,
    Storage,
    Strategy,
    Workload,
    exchanges_gradients,
    reductions,
)
from harness.contract.workloads import WORKLOADS


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    title: str
    launchers: tuple[str, ...]  # names in harness.launchers.REGISTRY it can be started by; the first is its default
    worker_module: str  # run as ``python -m harness.contract.worker <worker_module> SPEC``
    requires: tuple[str, ...]  # importable module names every run needs
    workloads: tuple[Workload, ...]
    strategies: tuple[Strategy, ...]
    storage: tuple[Storage, ...]
    devices: tuple[Device, ...]
    # The container image the cluster launchers run it in (kubernetes; slurm with a container runtime; podman),
    # built by ``dockerfile`` and by no other Dockerfile in docker/ (tests/unit/tools/test_docker.py). Launcher options may
    # name another image. The Dockerfile's stem is its name in tools/container_images.py (torch, horovod, ...).
    image: str
    dockerfile: str  # the repository's file that builds ``image`` (docker/<name>.Dockerfile)
    # The model family whose builder modules it runs (harness.contract.workloads.declaration.FAMILIES): every
    # workload it declares names a builder for this family in its declaration; "" for none (a benchmark only).
    family: str = ""
    # The Python environment its ranks run in (harness.base.python_envs: tools/envs/<name>.txt, made by
    # `make envs`); None: the harness's own .venv. A family whose pins cannot share .venv's (JAX's NumPy 2
    # beside Chainer's NumPy < 2) names its own; the harness finds its modules on disk, never importing them.
    environment: str | None = None
    workload_requires: Mapping[Workload, tuple[str, ...]] = field(default_factory=dict)
    precisions: tuple[Precision, ...] = (Precision.FP32,)
    memory_formats: Mapping[Workload, tuple[MemoryFormat, ...]] = field(default_factory=dict)  # default: contiguous
    compiles: tuple[Compile, ...] = (Compile.OFF,)
    # Strategies that run only on some devices (e.g. a hook that needs NCCL); others run on all.
    strategy_devices: Mapping[Strategy, tuple[Device, ...]] = field(default_factory=dict)
    # Strategies that run only some workloads (a model split into stages or shards); others run on all.
    strategy_workloads: Mapping[Strategy, tuple[Workload, ...]] = field(default_factory=dict)
    # The Kubeflow job kind that starts it on Kubernetes (harness.launchers.kubernetes): PyTorchJob
    # (torchrun in each pod), MPIJob (mpirun from a launcher pod) or TFJob (TF_CONFIG per pod).
    kubernetes_job: str = "PyTorchJob"
    # In containers on one machine (harness.launchers.podman): True, a container per rank, the ranks meeting
    # through torch.distributed-style variables; False (MPI: Horovod, ChainerMN), its own launcher (mpirun,
    # horovodrun) in one container holding all the ranks, since an mpirun reaching into sibling containers
    # would need an sshd in each (as a Kubeflow MPIJob has).
    container_per_rank: bool = False
    # The strategies whose exchange an emulated accelerator runs for real (device emulated, exchange
    # "gradients": harness.machines.emulated_cluster): the model's parameters, its gradients when the
    # framework's real step would have them (each layer's as its backward ends, or all after the backward).
    emulated_exchanges: tuple[Strategy, ...] = ()
    # An emulated rank's own memory before its model's parameters, gradients and exchange buffers (bytes:
    # Python, the framework, its communication library, its loader, its share of the launcher's agents);
    # sizes how many fit on this machine. PyTorch's: 16 emulated ResNet-50 ranks took 601 MB each of this
    # machine's memory through Horovod (MemAvailable's drop), 555 MB through DDP, of which 3 x 102 MB the
    # parameters, gradients and exchange buffers; importing torch alone is 236 MB of private memory.
    emulated_rank_base_bytes: float = 300e6
    # This machine's CPU work per byte an emulated rank exchanges, relative to gloo's ring over local TCP
    # (emulated_cluster.CPU_S_PER_EXCHANGED_BYTE): sizes the automatic dilation k.
    emulated_exchange_cpu_cost: float = 1.0
    # How an emulated cluster of this framework may be made smaller than one process a GPU (harness.contract.axes
    # .Reduction: a process standing for its host's G GPUs, gradients 1/s of their size over links s times
    # slower), and with which strategies: the reduction's in-host exchange is the framework's own code here
    emulated_reductions: tuple[Reduction, ...] = ()
    emulated_reduction_strategies: tuple[Strategy, ...] = (Strategy.ALLREDUCE,)

    def missing_modules(self, workload: Workload | None = None) -> list[str]:
        """Required modules that cannot be found in its environment (no import is done)."""
        needed = list(self.requires)
        if workload is not None:
            needed += self.workload_requires.get(workload, ())
        if self.environment is not None:
            return python_envs.missing_modules(self.environment, needed)
        return [m for m in needed if importlib.util.find_spec(m) is None]

    @property
    def image_name(self) -> str:
        """Its image's name in tools/container_images.py: the Dockerfile's stem (docker/torch.Dockerfile: torch)."""
        return self.dockerfile.rsplit("/", 1)[-1].removesuffix(".Dockerfile")

    @property
    def launcher(self) -> str:
        """The default launcher."""
        return self.launchers[0]

    def unsupported_reason(self, workload: Workload, strategy: Strategy, storage: Storage,
                           launcher: str | None = None, device: Device = Device.AUTO) -> str | None:
        """Why this framework cannot run the combination, or None if it can.

        With ``device`` auto, a strategy bound to some devices is not refused here: the worker,
        which knows what it found, reports it as skipped (see ``harness.contract.events``, ``skip``).
        """
        if launcher is not None and launcher not in self.launchers:
            return f"{self.name} cannot be started by {launcher} (it can by {', '.join(self.launchers)})"
        if workload not in self.workloads:
            return f"{self.name} has no {workload.value} model"
        if strategy not in self.strategies:
            return f"{self.name} does not implement strategy {strategy.value}"
        allowed = self.strategy_devices.get(strategy)
        if allowed and device != Device.AUTO and device not in allowed:
            return (f"strategy {strategy.value} runs on {', '.join(d.value for d in allowed)} only "
                    f"in {self.name}, not on {device.value}")
        workloads = self.strategy_workloads.get(strategy)
        if workloads and workload not in workloads:
            return (f"strategy {strategy.value} runs {', '.join(w.value for w in workloads)} only "
                    f"in {self.name}, not {workload.value}")
        if storage not in self.storage:
            return f"{self.name} cannot read from storage {storage.value}"
        if storage != Storage.SYNTHETIC and not WORKLOADS[workload].real_data:
            return f"workload {workload.value} has no dataset reader (it trains on its synthetic batch): storage synthetic"
        if device == Device.EMULATED and device not in self.devices:
            return f"{self.name} has no emulated accelerators (device emulated is not among its devices)"
        return None

    def unsupported_reduction(self, strategy: Strategy, emulation: Mapping[str, Any]) -> str | None:
        """Why this framework's emulated cluster cannot run the reductions ``emulation`` asks for (gpus_per_rank,
        gradient_scale) with ``strategy``; None when it asks for none or can."""
        asked = reductions(emulation)
        missing = [r.value for r in asked if r not in self.emulated_reductions]
        if missing:
            return (f"{self.name} has no emulated cluster with {' or '.join(missing)} "
                    f"(its emulated_reductions: {', '.join(r.value for r in self.emulated_reductions) or 'none'})")
        if asked and strategy not in self.emulated_reduction_strategies:
            return (f"{' and '.join(r.value for r in asked)} run in {self.name} with "
                    f"{', '.join(s.value for s in self.emulated_reduction_strategies)} only, not {strategy.value}")
        return None

    def unsupported_exchange(self, strategy: Strategy, emulation: Mapping[str, Any]) -> str | None:
        """Why an emulated accelerator of this framework cannot exchange real gradients with ``strategy``."""
        if not exchanges_gradients(emulation) or strategy in self.emulated_exchanges:
            return None
        if not self.emulated_exchanges:
            return f"{self.name} has no emulated accelerators with real gradients (exchange = \"gradients\")"
        return (f"{self.name}'s emulated accelerators exchange real gradients with "
                f"{', '.join(s.value for s in self.emulated_exchanges)} only, not {strategy.value}")

    def unsupported_numerics(self, workload: Workload, precision: Precision, memory_format: MemoryFormat,
                             compile_: Compile, device: Device) -> str | None:
        """Why this framework cannot train with these numerics on ``device``, or None.

        ``device`` auto is taken as "may have a GPU": a GPU-only precision on a machine without
        one then fails in the worker with its reason. An emulated accelerator (device emulated) computes
        nothing: precision, memory format and compile only pick the profiled accelerator's compute time
        (harness.machines.accelerators), whatever numerics the framework itself has.
        """
        if device == Device.EMULATED:
            return None
        if precision not in self.precisions:
            return f"{self.name} has no {precision.value} precision"
        if precision.needs_cuda and device == Device.CPU:
            return f"precision {precision.value} needs a CUDA GPU (device is cpu)"
        formats = self.memory_formats.get(workload, (MemoryFormat.CONTIGUOUS,))
        if memory_format not in formats:
            return f"{self.name} {workload.value} has no {memory_format.value} memory format"
        if compile_ not in self.compiles:
            return f"{self.name} cannot compile the model (compile = {compile_.value})"
        return None
