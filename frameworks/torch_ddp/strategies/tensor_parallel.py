"""Tensor parallelism (Megatron-LM style) on BERT with torch.distributed.tensor.parallel.

In every encoder layer the attention's query, key and value projections and the MLP's first linear
are split by output columns (``ColwiseParallel``: each rank holds heads / world of the heads and
intermediate / world of the MLP), the attention's output projection and the MLP's second linear by
input rows (``RowwiseParallel``: partial sums, allreduced). Embeddings, LayerNorms and the heads are
replicated; every rank sees the same batch, so their gradients agree without communication.

Bytes: each row-wise linear allreduces its output in forward; each column-wise linear allreduces the
gradient of its input in backward (its input is replicated). Both are counted from the tensors' sizes
by forward hooks (CommDebugMode, which would count them, fails on BERT's modules here);
``tests/test_tensor_parallel_dist.py`` checks the weights and losses against one process.
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


def parallelize_bert(model: nn.Module, device_type: str) -> ActivationAllreduces:
    """Shard every encoder layer of a transformers BERT across all ranks, in place."""
    world = dist.get_world_size()
    heads = model.config.num_attention_heads
    if heads % world or model.config.intermediate_size % world:
        raise ValueError(f"strategy tensor_parallel: {heads} heads and intermediate size "
                         f"{model.config.intermediate_size} must both divide by the world size {world}")
    mesh = init_device_mesh(device_type, (world,))
    counter = ActivationAllreduces()
    plan = {**{name: ColwiseParallel() for name in COLUMNWISE}, **{name: RowwiseParallel() for name in ROWWISE}}
    for layer in model.bert.encoder.layer:
        parallelize_module(layer, mesh, plan)
        for name in COLUMNWISE:
            layer.get_submodule(name).register_forward_hook(counter.columnwise)
        for name in ROWWISE:
            layer.get_submodule(name).register_forward_hook(counter.rowwise)
    return counter
