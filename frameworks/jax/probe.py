"""The equivalence probe of the Flax models (harness.contract.equivalence; torch_ddp's probe is the reference): their
layers read from the Flax modules as a forward pass is traced (``eval_shape``: nothing computed). A convolution and a
dense layer report themselves, the tied MLM decoder (``Embed.attend``) as the dense layer it is, a self-attention
module (BERT's, Llama's) its QK^T and AV over all query heads."""

from __future__ import annotations

from typing import Any, Mapping

from frameworks.jax import runtime  # first: XLA's flags before JAX starts

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402

from frameworks.jax import training  # noqa: E402
from frameworks.jax.workloads.bert import SelfAttention  # noqa: E402
from frameworks.jax.workloads.llama import LlamaAttention  # noqa: E402
from harness.contract.axes import Device, Workload  # noqa: E402
from harness.contract.equivalence import PROBE_BATCH, fixed_batch, probe_recipe, rows_per_sample  # noqa: E402


def _record(module: nn.Module, method: str, inputs: Any, out: Any, n: int) -> dict[str, Any] | None:
    """The layer record of one module call (None: no FLOP-carrying op of the contract)."""
    if isinstance(module, nn.Conv) and method == "__call__":
        return {"op": "conv", "in_channels": int(inputs.shape[-1]), "out_channels": module.features,
                "kernel": list(module.kernel_size), "stride": list(module.strides),
                "groups": module.feature_group_count, "out_hw": list(out.shape[1:3])}
    if isinstance(module, nn.Dense) and method == "__call__":
        return {"op": "dense", "in_features": int(inputs.shape[-1]), "out_features": module.features,
                "rows": rows_per_sample(out.size, n, module.features)}
    if isinstance(module, nn.Embed) and method == "attend":  # the tied decoder: hidden -> vocabulary
        return {"op": "dense", "in_features": int(inputs.shape[-1]), "out_features": module.num_embeddings,
                "rows": rows_per_sample(out.size, n, module.num_embeddings)}
    if isinstance(module, (SelfAttention, LlamaAttention)) and method == "__call__":
        return {"op": "attention", "seq_len": int(inputs.shape[1]), "hidden": module.hidden}
    return None


def layer_records(forward: Any, model: nn.Module, variables: Mapping[str, Any], batch: Mapping[str, Any],
                  n: int) -> list[dict[str, Any]]:
    """The FLOP-carrying ops of one forward pass of ``batch`` (``n`` samples), in order, from the modules as they
    are called (a self-attention module reports after its q, k, v projections, as PyTorch's hooks do)."""
    records: list[dict[str, Any]] = []

    def record(next_fun: Any, args: tuple, kwargs: dict, context: Any) -> Any:
        out = next_fun(*args, **kwargs)
        found = _record(context.module, context.method_name, args[0] if args else None, out, n)
        if found is not None:
            records.append(found)
        return out

    with nn.intercept_methods(record):
        jax.eval_shape(lambda v, b: forward(model, v, b), dict(variables), dict(batch))
    return records


def probe(workload: Workload, options: Mapping[str, Any], steps: int, seed: int) -> dict[str, Any]:
    """Parameters, layer records, optimizer facts and ``steps`` losses on the fixed batch (one process)."""
    runtime.configure(Device.CPU)
    module = training.model_module(workload)  # the worker's builder, weights and step
    tx = training.optimizer_from_recipe(probe_recipe(workload, options))
    model, state = training.initial_state(module, options, seed, tx)
    batch = module.to_jax(fixed_batch(workload, options, PROBE_BATCH, seed))
    layers = layer_records(module.forward, model, {"params": state[0], **state[1]},
                           {k: v[:2] for k, v in batch.items()}, 2)
    facts = training.optimizer_facts(state[2])
    losses = []
    if steps:
        step = jax.jit(training.train_step(model, module.loss_of, tx, None, seed))
        for _ in range(steps):
            *new, loss = step(*state, batch)
            state = tuple(new)
            losses.append(float(loss))
    return {"parameters": training.parameter_count(state[0]), "layers": layers, "optimizer": facts,
            "losses": losses}
