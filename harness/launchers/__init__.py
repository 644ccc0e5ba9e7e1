"""Launchers: how a run's ranks are started (imports ``harness.base`` and ``harness.contract`` only).

Launcher registry. A launcher is a pure function from a run to what would run (accelerate's
style): argument lists, an environment and files, never a shell string; :mod:`harness.running.execute`
is the thin layer that runs it.

Each launcher is a module named in ``REGISTRY`` that defines

- ``Options``: a frozen dataclass of its settings, read from a scenario's
  ``[launcher_options.<name>]`` table (unknown keys are errors);
- ``command(request) -> LaunchCommand``;
- ``unsupported_reason(spec) -> str | None``: why it cannot start the run here
  (a missing engine, too many nodes), which makes the run a ``skipped`` row;
- optionally ``NETNS_PREFERENCE = <int>``: it reaches network-namespace hosts (``remote = "netns"``),
  the number ordering them in the emulated cluster's launcher options;
- optionally ``CLUSTER = True``: it hands the run to a cluster's scheduler, whose nodes this
  machine's GPUs do not bound (``rosetta reproduce --at published``).

Adding a launcher means adding its module and a line here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

from harness.base import config, escaping
from harness.base.registry import Registry
from harness.contract import machine_load
from harness.contract.axes import Device
from harness.contract.spec import RunSpec

REGISTRY: dict[str, str] = {
    "torchrun": "harness.launchers.torchrun",
    "mpirun": "harness.launchers.mpirun",
    "horovodrun": "harness.launchers.horovodrun",
    "slurm": "harness.launchers.slurm",
    "kubernetes": "harness.launchers.kubernetes",
    "podman": "harness.launchers.podman",
    "azureml": "harness.launchers.azureml",
    "ray": "harness.launchers.ray",
    "spark": "harness.launchers.spark",
}
LAUNCHERS: Registry[ModuleType] = Registry("launcher", REGISTRY)
AUTO = "auto"  # the framework's own default launcher

Argv = tuple[str, ...]


@dataclass(frozen=True)
class LaunchCommand:
    """What would run: an argument list and the variables set on top of the harness's environment.

    ``files`` (name -> text) are written into the run's folder first (a batch script,
    manifests); ``setup`` commands run before the launch (e.g. shaping a link) and must
    succeed; ``also`` are further commands started beside ``argv`` in its process group
    (one per further host); ``abort`` runs when the launch is stopped early (a timeout,
    Ctrl-C), for engines whose work outlives the local process (``scancel``).
    """

    argv: Argv
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    setup: tuple[Argv, ...] = ()
    also: tuple[Argv, ...] = ()
    abort: tuple[Argv, ...] = ()


@dataclass(frozen=True)
class LaunchRequest:
    """The inputs every launcher gets."""

    spec: RunSpec
    worker_module: str
    spec_file: Path
    python: str
    cpu_count: int
    repo_root: Path = Path(".")
    # the interpreter the ranks start with: the framework family's environment's (harness.base.python_envs),
    # "" for the harness's own (``python``)
    worker_python: str = ""

    @property
    def rank_python(self) -> str:
        """The interpreter each rank runs ``harness.contract.worker`` with."""
        return self.worker_python or self.python

    @property
    def run_dir(self) -> Path:
        return self.spec_file.parent


Launcher = Callable[[LaunchRequest], LaunchCommand]


def names() -> list[str]:
    return LAUNCHERS.names()


def module(name: str, where: str = "") -> ModuleType:
    """The launcher's module (``UnknownName``, listing the valid names, if unknown)."""
    return LAUNCHERS.get(name, where)


def netns_launchers() -> tuple[str, ...]:
    """The launchers that reach network-namespace hosts, in the order of their ``NETNS_PREFERENCE``."""
    ranked = [(getattr(module(name), "NETNS_PREFERENCE", None), name) for name in names()]
    return tuple(name for rank, name in sorted((r, n) for r, n in ranked if r is not None))


def get(name: str) -> Launcher:
    return module(name).command


def options(request_or_spec: LaunchRequest | RunSpec) -> Any:
    """The run's launcher options as the launcher's ``Options`` dataclass."""
    spec = getattr(request_or_spec, "spec", request_or_spec)
    where = config.Where("run spec", f"launcher_options.{spec.launcher}")
    return config.build(module(spec.launcher).Options, spec.launcher_options, where)


def options_as_data(value: Any) -> dict[str, Any]:
    """An ``Options`` instance as plain JSON-able data (enums as their values, tuples as lists)."""
    def plain(v: Any) -> Any:
        if hasattr(v, "value"):
            return v.value
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        return v
    return {k: plain(v) for k, v in dataclasses.asdict(value).items()}


def unsupported_reason(name: str, spec: RunSpec) -> str | None:
    """Why launcher ``name`` cannot start ``spec`` here, or None."""
    return module(name).unsupported_reason(spec)


def worker_argv(request: LaunchRequest) -> list[str]:
    """The per-rank command every launcher ends with."""
    return ["-m", "harness.contract.worker", request.worker_module, str(request.spec_file)]


def threads_per_rank(request: LaunchRequest, node_cpus: int | None = None) -> int:
    """CPU threads per rank so that the ranks on one node share its cores without oversubscription.

    ``node_cpus``: the cores of the node the ranks run on, where it is not this machine.
    """
    return max(1, (node_cpus or request.cpu_count) // request.spec.procs_per_node)


def worker_env(request: LaunchRequest, node_cpus: int | None = None) -> dict[str, str]:
    """Variables every rank gets, whatever starts it."""
    threads = str(threads_per_rank(request, node_cpus))
    env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1"}
    if request.rank_python != request.python:  # a family's own environment: the harness is not installed there
        env["PYTHONPATH"] = str(Path(request.repo_root).absolute())
    if request.spec.device == Device.EMULATED:  # its ranks sleep their compute: no compute threads (machine_load)
        env[machine_load.COMPUTE_THREADS_VARIABLE] = "0"
    return env


def results_root(request: LaunchRequest) -> Path:
    """The results folder the run's folder lies in (``<results>/<runs|dry-run>/<sweep>/<run>``):
    what a container must mount to read the spec and write the records."""
    return request.run_dir.parents[2]


def remote_argv(prefix: Argv, cwd: Path, env: Mapping[str, str], argv: Argv) -> Argv:
    """``argv`` run on another host through ``prefix`` (ssh, ip netns exec), in ``cwd`` with ``env``.

    The environment and folder are given explicitly (``env -C``) because a remote shell
    does not carry the harness's. ssh hands its arguments, joined by spaces, to the remote user's shell:
    there the command is one shell-quoted line, so that no value is split or read as shell syntax.
    """
    remote = ("env", "-C", str(cwd), *(f"{k}={v}" for k, v in env.items()), *argv)
    return (*prefix, escaping.shell_line(remote)) if prefix[:1] == ("ssh",) else (*prefix, *remote)


def framework_image(request_or_spec: LaunchRequest | RunSpec, chosen: str = "") -> str:
    """The container image a run's ranks run in: ``chosen`` (a launcher's option), else the framework's
    declared image (``FrameworkInfo.image``, built from ``docker/``): the one the kubernetes, slurm and
    podman launchers name."""
    import frameworks  # noqa: PLC0415 (frameworks' declarations import harness.contract, which is below)

    spec = getattr(request_or_spec, "spec", request_or_spec)
    return chosen or frameworks.get(spec.framework).image
