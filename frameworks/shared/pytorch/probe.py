"""The equivalence probe of the PyTorch models (the reference of the contract, harness.contract.equivalence),
whatever wraps their optimizer: torch_ddp's probe and horovod_torch's are :func:`probe_with`."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
from torch import nn

from frameworks.shared.pytorch.training import (
    build_model,
    loss_of,
    optimizer_from_recipe,
)
from harness.contract.axes import Workload
from harness.contract.equivalence import (
    PROBE_BATCH,
    fixed_batch,
    probe_recipe,
    rows_per_sample,
)


def layer_records(model: nn.Module, batch: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    """The FLOP-carrying ops of one forward pass, from forward hooks on the model's own modules."""
    n = next(iter(batch.values())).shape[0]
    records: list[dict[str, Any]] = []

    def on_forward(module: nn.Module, inputs: tuple, output: Any) -> None:
        if isinstance(module, nn.Conv2d):
            records.append({"op": "conv", "in_channels": module.in_channels, "out_channels": module.out_channels,
                            "kernel": list(module.kernel_size), "stride": list(module.stride),
                            "groups": module.groups, "out_hw": list(output.shape[-2:])})
        elif isinstance(module, nn.Linear):
            records.append({"op": "dense", "in_features": module.in_features, "out_features": module.out_features,
                            "rows": rows_per_sample(output.numel(), n, module.out_features)})
        elif type(module).__name__ in ("BertSelfAttention", "LlamaAttention"):  # QK^T and AV over all query heads
            hidden_states = inputs[0] if inputs else None
            seq_len = hidden_states.shape[1] if hidden_states is not None else batch["input_ids"].shape[1]
            records.append({"op": "attention", "seq_len": seq_len, "hidden": module.all_head_size})

    handles = [m.register_forward_hook(on_forward) for m in model.modules()]
    try:
        with torch.no_grad():
            model(batch["images"]) if "images" in batch else model(**_inputs_only(batch))
    finally:
        for handle in handles:
            handle.remove()
    # a self-attention module's hook fires after its q, k, v Linear hooks: the order is the forward order
    return records


def _inputs_only(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in batch.items() if k not in ("labels", "next_sentence_label")}


def probe_with(workload: Workload, options: Mapping[str, Any], steps: int, seed: int,
               wrap: Callable[[torch.optim.Optimizer, nn.Module], torch.optim.Optimizer],
               facts: Callable[[torch.optim.Optimizer], dict[str, Any]]) -> dict[str, Any]:
    """The probe of a PyTorch model whose optimizer a framework wraps (Horovod's DistributedOptimizer):
    ``wrap`` makes the framework's optimizer from the recipe's, ``facts`` reads the optimizer facts back."""
    torch.manual_seed(seed)
    model = build_model(workload, dict(options))
    batch = {k: torch.from_numpy(v) for k, v in fixed_batch(workload, options, PROBE_BATCH, seed).items()}
    model.eval()
    layers = layer_records(model, {k: v[:2] for k, v in batch.items()})
    model.train()
    optimizer = wrap(optimizer_from_recipe(probe_recipe(workload, options), model), model)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_of(workload, model, batch)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return {"parameters": sum(p.numel() for p in model.parameters() if p.requires_grad), "layers": layers,
            "optimizer": facts(optimizer), "losses": losses}
