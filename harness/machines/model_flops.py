"""Model FLOPs of each workload from its options alone, counted the way the equivalence contract counts them.

:func:`forward_layers` writes the layer records (``conv``, ``dense``, ``attention``, see
:func:`harness.contract.equivalence.layer_flops`) of one forward pass of one *sequence or image*
from the workload's options, without building a model; ``tests/test_model_flops.py`` holds it equal to
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

from harness.contract.axes import Workload
from harness.contract.equivalence import flops_per_sample, layer_flops

TRAINING_FLOPS_PER_FORWARD = 3  # forward + backward (2 x forward): Kaplan et al. 2020, PaLM appendix B

RESNET50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride), ResNet v1.5
DIGITS_FEATURES, DIGITS_CLASSES = 64, 10  # 8x8 images, 10 digits


def _conv(c_in: int, c_out: int, k: int, stride: int, out: int) -> dict[str, Any]:
    return {"op": "conv", "in_channels": c_in, "out_channels": c_out, "kernel": [k, k], "stride": [stride, stride],
            "groups": 1, "out_hw": [out, out]}


def _dense(n_in: int, n_out: int, rows: int) -> dict[str, Any]:
    return {"op": "dense", "in_features": n_in, "out_features": n_out, "rows": rows}


def _conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def resnet50_layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """ResNet-50 v1.5 (the stride on the 3x3 convolution; a projection shortcut where the shape changes)."""
    size = _conv_out(int(options["image_size"]), 7, 2, 3)
    layers = [_conv(3, 64, 7, 2, size)]
    size = _conv_out(size, 3, 2, 1)  # max pool
    c_in = 64
    for width, blocks, first_stride in RESNET50_STAGES:
        for block in range(blocks):
            stride = first_stride if block == 0 else 1
            out = _conv_out(size, 3, stride, 1)
            layers += [_conv(c_in, width, 1, 1, size), _conv(width, width, 3, stride, out),
                       _conv(width, 4 * width, 1, 1, out)]
            if stride != 1 or c_in != 4 * width:
                layers.append(_conv(c_in, 4 * width, 1, stride, out))
            c_in, size = 4 * width, out
    return layers + [_dense(c_in, int(options["num_classes"]), 1)]


def bert_layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """BERT pre-training: the encoder, the pooler, the MLM head (transform and decoder) and the NSP head."""
    h, seq, inter = int(options["hidden_size"]), int(options["seq_len"]), int(options["intermediate_size"])
    per_layer = [_dense(h, h, seq), _dense(h, h, seq), _dense(h, h, seq),
                 {"op": "attention", "seq_len": seq, "hidden": h},
                 _dense(h, h, seq), _dense(h, inter, seq), _dense(inter, h, seq)]
    return (per_layer * int(options["num_layers"]) + [_dense(h, h, 1), _dense(h, h, seq),
                                                      _dense(h, int(options["vocab_size"]), seq), _dense(h, 2, 1)])


def digits_layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The digits MLP: 64 pixels, two hidden layers, 10 classes."""
    hidden = int(options["hidden_size"])
    return [_dense(DIGITS_FEATURES, hidden, 1), _dense(hidden, hidden, 1), _dense(hidden, DIGITS_CLASSES, 1)]


def llama_layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A Llama-style decoder: per layer the q, k, v projections (k and v of the grouped key-value heads),
    attention over the sequence, the output projection and SwiGLU's gate, up and down; then the LM head."""
    h, seq, ffn = int(options["hidden_size"]), int(options["seq_len"]), int(options["intermediate_size"])
    kv = h // int(options["num_heads"]) * int(options["num_kv_heads"])
    per_layer = [_dense(h, h, seq), _dense(h, kv, seq), _dense(h, kv, seq),
                 {"op": "attention", "seq_len": seq, "hidden": h},
                 _dense(h, h, seq), _dense(h, ffn, seq), _dense(h, ffn, seq), _dense(ffn, h, seq)]
    return per_layer * int(options["num_layers"]) + [_dense(h, int(options["vocab_size"]), seq)]


LAYERS = {Workload.RESNET50: resnet50_layers, Workload.BERT: bert_layers, Workload.DIGITS: digits_layers,
          Workload.LLAMA: llama_layers}


def llama_parameters(options: Mapping[str, Any]) -> int:
    """Trainable parameters of the Llama-style decoder: the embedding, per layer the attention's and SwiGLU's
    weights and two RMSNorm scales, the final RMSNorm and the untied LM head (no biases)."""
    h, ffn, vocab = int(options["hidden_size"]), int(options["intermediate_size"]), int(options["vocab_size"])
    kv = h // int(options["num_heads"]) * int(options["num_kv_heads"])
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * ffn + 2 * h
    return vocab * h + int(options["num_layers"]) * per_layer + h + h * vocab


def forward_layers(workload: Workload, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The layer records of one forward pass of one image or sequence."""
    return LAYERS[workload](options)


def training_flops_per_sample(workload: Workload, options: Mapping[str, Any], samples_per_item: int = 1) -> float:
    """Model FLOPs of training on one sample (forward + backward, 3 x forward); ``samples_per_item``: the
    samples one image or sequence counts as (a sequence's tokens where the workload counts tokens)."""
    return TRAINING_FLOPS_PER_FORWARD * flops_per_sample(forward_layers(workload, options)) / samples_per_item


def weight_parameters(workload: Workload, options: Mapping[str, Any]) -> int:
    """Parameters of the convolutions' and dense layers' weights (no biases, norms or embeddings but llama's):
    a lower bound of the gradient an exchange carries, for sizing an emulation without building the model."""
    if workload == Workload.LLAMA:
        return llama_parameters(options)
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


def shares_by_shape(workload: Workload, options: Mapping[str, Any], shapes: list[tuple[int, ...]]) -> list[float]:
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
            raise ValueError(f"{workload.value}: no variable of the model holds model_flops' layer {kernels[i]} "
                             f"(nor a bias of its output's size): the model and harness/machines/model_flops.py "
                             f"differ")
        flops[owner] = float(layer_flops(record))
    total = sum(flops)
    return [f / total for f in flops]
