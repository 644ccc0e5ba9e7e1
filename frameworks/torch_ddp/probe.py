"""The equivalence probe of PyTorch DDP: the PyTorch models with torch.optim's optimizer, unwrapped (DDP
changes no update: one process's step is the reference of the contract)."""

from __future__ import annotations

from typing import Any, Mapping

from frameworks.shared.pytorch.probe import probe_with
from frameworks.shared.pytorch.training import optimizer_facts
from harness.contract.axes import Workload


def probe(workload: Workload, options: Mapping[str, Any], steps: int, seed: int) -> dict[str, Any]:
    """Parameters, layer records, optimizer facts and ``steps`` losses on the fixed batch."""
    return probe_with(workload, options, steps, seed, lambda optimizer, model: optimizer, optimizer_facts)
