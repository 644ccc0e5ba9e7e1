"""Model FLOPs of each workload from its options alone, counted the way the equivalence contract counts them.

:func:`forward_layers` writes the layer records (``conv``, ``dense``, ``attention``, see
:func:`harness.contract.equivalence.layer_flops`) of one forward pass of one *sequence or image*
from the workload's options, without building a model (the records are its declaration's ``layers``,
harness/contract/workloads/<workload>.py); ``tests/test_model_flops.py`` holds it equal to
the reference framework's probe (read from its own modules) for every workload and size. The harness
uses it where no framework is loaded: the row's achieved FLOP/s and MFU (:mod:`harness.results.utilization`),
dry runs and published configurations.

Training FLOPs = 3 x forward FLOPs: the backward pass takes twice the forward's (one matmul for the
gradient of the inputs, one for the weights'), the convention of Kaplan et al. 2020 ("Scaling Laws for
Neural Language Models", arXiv:2001.08361, section 2.1: C = 6N per token, 2N forward) and of the MFU of
Chowdhery et al. 2022 (PaLM, arXiv:2204.02311, appendix B: 6N + 12LHQT per token, which is 3 x the
forward's 2N + 4LHQT, attention included, no discount for a causal mask), as torchtitan counts it. It is
*model* FLOPs: recomputation (activation checkpointing), the optimizer and element-wise ops are not
counted, and causal attention is counted in full.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from harness.contract.equivalence import flops_per_sample, layer_flops
from harness.contract.workloads import DECLARATIONS

TRAINING_FLOPS_PER_FORWARD = 3  # forward + backward (2 x forward): Kaplan et al. 2020, PaLM appendix B


def forward_layers(workload: Any, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The layer records of one forward pass of one image or sequence (the workload's declaration's ``layers``)."""
    return DECLARATIONS[workload].layers(options)


def training_flops_per_sample(workload: Any, options: Mapping[str, Any], samples_per_item: int = 1) -> float:
    """Model FLOPs of training on one sample (forward + backward, 3 x forward); ``samples_per_item``: the
    samples one image or sequence counts as (a sequence's tokens where the workload counts tokens)."""
    return TRAINING_FLOPS_PER_FORWARD * flops_per_sample(forward_layers(workload, options)) / samples_per_item


def weight_parameters(workload: Any, options: Mapping[str, Any]) -> int:
    """Parameters of the convolutions' and dense layers' weights (no biases, norms or embeddings), or the
    declaration's exact count where it has one (llama's, embeddings included):
    a lower bound of the gradient an exchange carries, for sizing an emulation without building the model."""
    counted = DECLARATIONS[workload].counted_parameters
    if counted is not None:
        return counted(options)
    total = 0
    for layer in forward_layers(workload, options):
        if layer["op"] == "conv":
            total += layer["in_channels"] * layer["out_channels"] * math.prod(layer["kernel"]) // layer["groups"]
        elif layer["op"] == "dense":
            total += layer["in_features"] * layer["out_features"]
    return total


def _weight_shape(layer: Mapping[str, Any]) -> tuple[int, ...]:
    """A conv or dense record's kernel as Keras holds it: (kh, kw, in, out) or (in, out)."""
    if layer["op"] == "conv":
        return (*layer["kernel"], layer["in_channels"] // layer["groups"], layer["out_channels"])
    return (layer["in_features"], layer["out_features"])


def shares_by_shape(workload: Any, options: Mapping[str, Any], shapes: list[tuple[int, ...]]) -> list[float]:
    """Each of a model's variables' share of the forward's FLOPs (they sum to 1), for an emulated step that
    times the variables in their order (frameworks/shared/emulated_clock.LayerClock).

    ``shapes``: the variables' shapes in the framework's order (Keras: the order they were made in). A
    kernel takes the FLOPs of the first layer record of its shape not yet taken (its block's layers repeat;
    within a block Keras may make them in another order than the forward runs them); embeddings, norms
    and biases take none, except a layer whose kernel is another's (BERT's MLM decoder, tied to the word
    embeddings): its FLOPs go to its own bias, as PyTorch's FLOP counter gives them to the decoder module.
    The attention's score and value products, which no variable holds, are spread over the rest in
    proportion. A record that no variable takes is an error: the model and model_flops disagree."""
    records = [r for r in forward_layers(workload, options) if r["op"] in ("conv", "dense")]
    kernels = [_weight_shape(r) for r in records]
    shapes = [tuple(shape) for shape in shapes]
    taken = [False] * len(records)
    flops = [0.0] * len(shapes)
    for index, shape in enumerate(shapes):
        found = next((i for i, kernel in enumerate(kernels) if not taken[i] and kernel == shape), None)
        if found is not None:
            taken[found] = True
            flops[index] = float(layer_flops(records[found]))
    for i, record in enumerate(records):
        if taken[i]:
            continue
        bias = (record["out_features"],) if record["op"] == "dense" else None
        owner = next((j for j, shape in enumerate(shapes) if shape == bias and flops[j] == 0.0), None)
        if owner is None:
            raise ValueError(f"{getattr(workload, 'value', workload)}: no variable of the model holds model_flops' layer {kernels[i]} "
                             f"(nor a bias of its output's size): the model and harness/machines/model_flops.py "
                             f"differ")
        flops[owner] = float(layer_flops(record))
    total = sum(flops)
    return [f / total for f in flops]
