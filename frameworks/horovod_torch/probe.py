"""The equivalence probe of Horovod PyTorch: the worker's model and its Horovod optimizer, on one process.

The model and layer records are PyTorch DDP's (the same builder and forward hooks); what is Horovod's
own is the optimizer: the worker's hvd.DistributedOptimizer, trained here with Horovod initialised
as a single process (its allreduce is skipped at size 1), and its facts read back from it.
"""

from __future__ import annotations

from typing import Any, Mapping

import horovod.torch as hvd
import torch

from frameworks.horovod_torch.distributed import distributed_optimizer
from frameworks.shared.pytorch.probe import probe_with
from frameworks.shared.pytorch.training import optimizer_facts
from harness.contract.axes import Strategy, Workload


def distributed_optimizer_facts(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The probe's optimizer facts of a Horovod DistributedOptimizer.

    Horovod makes, at run time, a subclass of the wrapped optimizer's class (same param groups, same
    update): the facts are read from its param groups as those of that torch.optim class.
    """
    base = next(c for c in type(optimizer).__mro__ if c.__module__.startswith("torch.optim."))
    view = object.__new__(base)
    view.param_groups = optimizer.param_groups
    return optimizer_facts(view)


def probe(workload: Workload, options: Mapping[str, Any], steps: int, seed: int) -> dict[str, Any]:
    """Parameters, layer records, optimizer facts and ``steps`` losses on the fixed batch."""
    hvd.init()

    def wrap(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> torch.optim.Optimizer:
        return distributed_optimizer(optimizer, model, Strategy.ALLREDUCE)[0]

    return probe_with(workload, options, steps, seed, wrap, distributed_optimizer_facts)
