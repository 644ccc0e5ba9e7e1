"""The equivalence probe of the Flax model (harness.contract.equivalence; torch_ddp's probe is the reference): its
layers read from the Flax modules as a forward pass is traced (``eval_shape``: nothing computed)."""

from __future__ import annotations

from typing import Any, Mapping

from frameworks.jax import runtime  # first: XLA's flags before JAX starts

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402

from frameworks.jax import training  # noqa: E402
from frameworks.jax.models import build_model, init_variables, parameter_count  # noqa: E402
from harness.contract.axes import Device, Workload  # noqa: E402
from harness.contract.equivalence import PROBE_BATCH, fixed_batch, probe_recipe, rows_per_sample  # noqa: E402


def layer_records(model: nn.Module, variables: Mapping[str, Any], images: Any) -> list[dict[str, Any]]:
    """The convolutions and dense layers of one forward pass, in order, from the modules as they are called."""
    records: list[dict[str, Any]] = []

    def record(next_fun: Any, args: tuple, kwargs: dict, context: Any) -> Any:
        out = next_fun(*args, **kwargs)
        module = context.module
        if context.method_name != "__call__":
            return out
        if isinstance(module, nn.Conv):
            records.append({"op": "conv", "in_channels": int(args[0].shape[-1]), "out_channels": module.features,
                            "kernel": list(module.kernel_size), "stride": list(module.strides),
                            "groups": module.feature_group_count, "out_hw": list(out.shape[1:3])})
        elif isinstance(module, nn.Dense):
            records.append({"op": "dense", "in_features": int(args[0].shape[-1]), "out_features": module.features,
                            "rows": rows_per_sample(out.size, images.shape[0], module.features)})
        return out

    with nn.intercept_methods(record):
        jax.eval_shape(lambda v, x: model.apply(v, x, train=False), dict(variables), images)
    return records


def probe(workload: Workload, options: Mapping[str, Any], steps: int, seed: int) -> dict[str, Any]:
    """Parameters, layer records, optimizer facts and ``steps`` losses on the fixed batch (one process)."""
    if workload != Workload.RESNET50:
        raise ValueError(f"the jax sub-package has no {workload.value} model")
    runtime.configure(Device.CPU)
    model = build_model(dict(options))
    variables = init_variables(model, options, seed)  # the worker's builder and weights
    batch = training.to_jax(fixed_batch(workload, options, PROBE_BATCH, seed))
    layers = layer_records(model, variables, batch["images"][:2])
    tx = training.optimizer_from_recipe(probe_recipe(workload, options))
    state = (variables["params"], variables["batch_stats"], tx.init(variables["params"]))
    facts = training.optimizer_facts(state[2])
    losses = []
    if steps:
        step = jax.jit(training.train_step(model, tx, None))
        for _ in range(steps):
            *new, loss = step(*state, batch["images"], batch["labels"])
            state = tuple(new)
            losses.append(float(loss))
    return {"parameters": parameter_count(variables["params"]), "layers": layers, "optimizer": facts,
            "losses": losses}
