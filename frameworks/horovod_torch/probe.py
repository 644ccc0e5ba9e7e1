"""The equivalence probe of Horovod PyTorch: the worker's model and its Horovod optimizer, on one process.

The model and layer records are PyTorch DDP's (the same builder and forward hooks); what is Horovod's
own is the optimizer: the worker's hvd.DistributedOptimizer, trained here with Horovod initialised
as a single process (its allreduce is skipped at size 1), and its facts read back from it.
"""

from __future__ import annotations

from typing import Any, Mapping

import horovod.torch as hvd
import torch

from frameworks.horovod_torch.worker import distributed_optimizer
from frameworks.torch_ddp.probe import layer_records
from frameworks.torch_ddp.training import build_model, loss_of, optimizer_facts, optimizer_from_recipe
from harness.axes import Strategy, Workload
from harness.equivalence import PROBE_BATCH, fixed_batch, probe_recipe


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
    torch.manual_seed(seed)
    model = build_model(workload, dict(options))
    batch = {k: torch.from_numpy(v) for k, v in fixed_batch(workload, options, PROBE_BATCH, seed).items()}
    model.eval()
    layers = layer_records(model, {k: v[:2] for k, v in batch.items()})
    model.train()
    optimizer, _ = distributed_optimizer(optimizer_from_recipe(probe_recipe(workload, options), model), model,
                                         Strategy.ALLREDUCE)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_of(workload, model, batch)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return {"parameters": sum(p.numel() for p in model.parameters() if p.requires_grad), "layers": layers,
            "optimizer": distributed_optimizer_facts(optimizer), "losses": losses}
