"""The equivalence probe of the Keras models (harness.contract.equivalence), shared by the TensorFlow frameworks.

Layer records come from the model's own layers as they run: each FLOP-carrying layer's ``call``
is wrapped for one eager forward pass and reports its configuration and output shape when it
returns, the way PyTorch forward hooks do (a self-attention layer reports after its q, k, v).
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

import keras
import numpy as np
import tensorflow as tf

from frameworks.shared.keras.bert import SelfAttention, TiedDecoder
from frameworks.shared.keras.llama import LlamaAttention
from frameworks.shared.keras.training import (
    build_model,
    build_train_step,
    model_inputs,
    optimization_from_recipe,
    parameter_count,
    to_tensors,
)
from harness.contract.axes import Workload
from harness.contract.equivalence import (
    PROBE_BATCH,
    fixed_batch,
    probe_recipe,
    rows_per_sample,
)


def _record(layer: keras.layers.Layer, inputs: Any, output: Any, n: int) -> dict[str, Any]:
    shape = tuple(output.shape)
    if isinstance(layer, keras.layers.Conv2D):  # kernel (kh, kw, in/groups, out), output NHWC
        kh, kw, per_group, out_channels = layer.kernel.shape
        return {"op": "conv", "in_channels": int(per_group) * layer.groups, "out_channels": int(out_channels),
                "kernel": [int(kh), int(kw)], "stride": [int(s) for s in layer.strides], "groups": layer.groups,
                "out_hw": [int(shape[1]), int(shape[2])]}
    if isinstance(layer, keras.layers.Dense):
        in_features, out_features = (int(d) for d in layer.kernel.shape)
        return {"op": "dense", "in_features": in_features, "out_features": out_features,
                "rows": rows_per_sample(int(np.prod(shape)), n, out_features)}
    if isinstance(layer, TiedDecoder):  # a dense layer whose kernel is the word-embedding matrix
        vocab = int(shape[-1])
        return {"op": "dense", "in_features": int(inputs.shape[-1]), "out_features": vocab,
                "rows": rows_per_sample(int(np.prod(shape)), n, vocab)}
    if isinstance(layer, (SelfAttention, LlamaAttention)):  # QK^T and AV over all query heads: (n, seq, hidden) out
        return {"op": "attention", "seq_len": int(shape[1]), "hidden": int(shape[2])}
    raise TypeError(f"no probe record for layer {type(layer).__name__}")


def layer_records(model: keras.Model, inputs: Any, n: int) -> list[dict[str, Any]]:
    """The FLOP-carrying ops of one eager forward pass of ``inputs`` (``n`` samples), in the order they ran."""
    records: list[dict[str, Any]] = []
    wrapped = []

    def watch(layer: keras.layers.Layer) -> None:
        original = layer.call

        @functools.wraps(original)
        def call(*args, **kwargs):
            output = original(*args, **kwargs)
            records.append(_record(layer, args[0] if args else None, output, n))
            return output

        object.__setattr__(layer, "call", call)  # past Keras's attribute tracking; removed below
        wrapped.append(layer)

    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense, TiedDecoder, SelfAttention, LlamaAttention)):
            watch(layer)
    try:
        model(inputs, training=False)
    finally:
        for layer in wrapped:
            del layer.__dict__["call"]
    return records


def probe(workload: Workload, options: Mapping[str, Any], steps: int, seed: int) -> dict[str, Any]:
    """Parameters, layer records, optimizer facts and ``steps`` losses on the fixed batch (one process)."""
    keras.utils.set_random_seed(seed)
    model = build_model(workload, options)
    batch = to_tensors(workload, fixed_batch(workload, options, PROBE_BATCH, seed))
    layers = layer_records(model, model_inputs(workload, {k: v[:2] for k, v in batch.items()}), 2)
    optimization = optimization_from_recipe(probe_recipe(workload, options))
    step = tf.function(build_train_step(workload, model, optimization))
    losses = [float(step(batch)) for _ in range(steps)]
    return {"parameters": parameter_count(model), "layers": layers, "optimizer": optimization.facts(),
            "losses": losses}
