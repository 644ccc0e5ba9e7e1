"""Launcher registry. A launcher is a pure function from a run to an argv and an
environment (accelerate's style); :mod:`harness.execute` is the thin layer that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from harness.spec import RunSpec


@dataclass(frozen=True)
class LaunchCommand:
    """What would run: an argument list and the variables set on top of the harness's environment."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchRequest:
    """The inputs every launcher gets."""

    spec: RunSpec
    worker_module: str
    spec_file: Path
    python: str
    cpu_count: int


Launcher = Callable[[LaunchRequest], LaunchCommand]


def worker_argv(request: LaunchRequest) -> list[str]:
    """The per-rank command every launcher ends with."""
    return ["-m", "harness.worker", request.worker_module, str(request.spec_file)]


def threads_per_rank(request: LaunchRequest) -> int:
    """CPU threads per rank so that the ranks on one node share its cores without oversubscription."""
    return max(1, request.cpu_count // request.spec.procs_per_node)


def get(name: str) -> Launcher:
    from harness.launchers import torchrun

    launchers: dict[str, Launcher] = {"torchrun": torchrun.command}
    return launchers[name]


def unsupported_reason(name: str, spec: RunSpec) -> str | None:
    """Why launcher ``name`` cannot start ``spec`` here, or None."""
    if spec.nodes > 1:
        return f"{spec.nodes} nodes: the {name} launcher here runs on one node only"
    return None
