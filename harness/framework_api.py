"""What a framework sub-package declares about itself, as data (TorchBench style).

Each ``frameworks/<name>/__init__.py`` defines ``INFO = FrameworkInfo(...)``
without importing its deep-learning framework, so the harness can list, plan
and skip runs without installing anything.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Mapping

from harness.axes import Device, Storage, Strategy, Workload


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    title: str
    launchers: tuple[str, ...]  # names in harness.launchers.REGISTRY it can be started by; the first is its default
    worker_module: str  # run as ``python -m harness.worker <worker_module> SPEC``
    requires: tuple[str, ...]  # importable module names every run needs
    workloads: tuple[Workload, ...]
    strategies: tuple[Strategy, ...]
    storage: tuple[Storage, ...]
    devices: tuple[Device, ...]
    workload_requires: Mapping[Workload, tuple[str, ...]] = field(default_factory=dict)

    def missing_modules(self, workload: Workload | None = None) -> list[str]:
        """Required modules that cannot be found in this environment (no import is done)."""
        needed = list(self.requires)
        if workload is not None:
            needed += self.workload_requires.get(workload, ())
        return [m for m in needed if importlib.util.find_spec(m) is None]

    @property
    def launcher(self) -> str:
        """The default launcher."""
        return self.launchers[0]

    def unsupported_reason(self, workload: Workload, strategy: Strategy, storage: Storage,
                           launcher: str | None = None) -> str | None:
        """Why this framework cannot run the combination, or None if it can."""
        if launcher is not None and launcher not in self.launchers:
            return f"{self.name} cannot be started by {launcher} (it can by {', '.join(self.launchers)})"
        if workload not in self.workloads:
            return f"{self.name} has no {workload.value} model"
        if strategy not in self.strategies:
            return f"{self.name} does not implement strategy {strategy.value}"
        if storage not in self.storage:
            return f"{self.name} cannot read from storage {storage.value}"
        return None
