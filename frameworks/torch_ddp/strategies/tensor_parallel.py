"""Tensor parallelism (Megatron-LM style) on BERT and the Llama decoder with torch.distributed.tensor.parallel.

In every encoder layer the attention's query, key and value projections and the MLP's first linear
are split by output columns (``ColwiseParallel``: each rank holds heads / world of the heads and
intermediate / world of the MLP), the attention's output projection and the MLP's second linear by
input rows (``RowwiseParallel``: partial sums, allreduced). Embeddings, LayerNorms and the heads are
replicated; every rank sees the same batch, so their gradients agree without communication. The Llama
decoder is split the same way (torchtitan's plan without its sequence parallelism): the query, key, value,
gate and up projections by columns (heads / world query heads and kv_heads / world key-value heads per
rank), the output and down projections by rows; RMSNorms, the embedding and the LM head replicated.

Bytes: each row-wise linear allreduces its output in forward; each column-wise linear allreduces the
gradient of its input in backward (its input is replicated). Both are counted from the tensors' sizes
by forward hooks (CommDebugMode, which would count them, fails on BERT's modules here);
``tests/runs/test_tensor_parallel_dist.py`` checks the weights and losses against one process.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

COLUMNWISE = ("attention.self.query", "attention.self.key", "attention.self.value", "intermediate.dense")
ROWWISE = ("attention.output.dense", "output.dense")


@dataclass
class ActivationAllreduces:
    """Payload handed to TP's allreduces (bytes), counted as the layers run."""

    bytes_sent: int = 0

    def rowwise(self, module: nn.Module, inputs: tuple, output) -> None:
        self.bytes_sent += output.numel() * output.element_size()

    def columnwise(self, module: nn.Module, inputs: tuple, output) -> None:
        if inputs[0].requires_grad:  # its gradient is allreduced in backward
            self.bytes_sent += inputs[0].numel() * inputs[0].element_size()


LLAMA_COLUMNWISE = ("attention.q_proj", "attention.k_proj", "attention.v_proj", "feed_forward.gate_proj",
                    "feed_forward.up_proj")
LLAMA_ROWWISE = ("attention.o_proj", "feed_forward.down_proj")


def parallelize(model: nn.Module, device_type: str) -> ActivationAllreduces:
    """Shard every layer of a transformers BERT, or of the Llama decoder, across all ranks, in place."""
    world = dist.get_world_size()
    if hasattr(model, "bert"):
        config = model.config
        layers, columnwise, rowwise = model.bert.encoder.layer, COLUMNWISE, ROWWISE
        split = {"heads": config.num_attention_heads, "intermediate size": config.intermediate_size}
    else:
        first = model.layers[0]
        layers, columnwise, rowwise = model.layers, LLAMA_COLUMNWISE, LLAMA_ROWWISE
        split = {"heads": first.attention.q_proj.out_features // first.attention.head_dim,
                 "key-value heads": first.attention.k_proj.out_features // first.attention.head_dim,
                 "intermediate size": first.feed_forward.gate_proj.out_features}
    uneven = [f"{name} {count}" for name, count in split.items() if count % world]
    if uneven:
        raise ValueError(f"strategy tensor_parallel: {', '.join(uneven)} must divide by the world size {world}")
    mesh = init_device_mesh(device_type, (world,))
    counter = ActivationAllreduces()
    plan = {**{name: ColwiseParallel() for name in columnwise}, **{name: RowwiseParallel() for name in rowwise}}
    for layer in layers:
        parallelize_module(layer, mesh, plan)
        for name in columnwise:
            layer.get_submodule(name).register_forward_hook(counter.columnwise)
        for name in rowwise:
            layer.get_submodule(name).register_forward_hook(counter.rowwise)
    return counter
