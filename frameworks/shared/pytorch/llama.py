"""The Llama-style decoder in PyTorch (torch_ddp's and horovod_torch's): pre-norm RMSNorm, rotary position
embedding (the rotate-half form), grouped-query attention (``num_kv_heads`` key/value heads, each shared by
``num_heads / num_kv_heads`` query heads), a SwiGLU feed-forward, no biases, an untied LM head, and the causal
language-model loss (every position predicts the next token). Its options are the workload's
(harness/contract/workloads.py); its parameters and FLOPs are held to the harness's count of them
(harness/machines/model_flops.py) by the equivalence probe.

The attention's head counts are read from its projections' outputs, not fixed at build time, so that tensor
parallelism, which splits the projections by heads, leaves each rank with its own heads.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn
from torch.nn import functional as F

INIT_STD = 0.02  # normal init of every projection and the embedding (as Llama's reference code and HF do)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) x a learned scale (Zhang and Sennrich 2019), computed in float32."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).type_as(x)


def rotary_tables(seq_len: int, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every position's rotation angles (seq_len x head_dim), the halves repeated."""
    inverse = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inverse)
    both = torch.cat([angles, angles], dim=-1)
    return both.cos(), both.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of ``x`` (batch, heads, seq, head_dim): each pair (i, i + d/2) rotated."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class LlamaAttention(nn.Module):
    """Causal grouped-query self-attention with rotary positions on the queries and keys."""

    def __init__(self, hidden: int, heads: int, kv_heads: int):
        super().__init__()
        self.head_dim, self.groups = hidden // heads, heads // kv_heads
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.all_head_size = hidden  # query heads x head size: what QK^T and AV multiply over

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:  # (batch, seq, n x head_dim) -> (batch, n, seq, head_dim)
            return t.view(batch, seq, -1, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k, v = k.repeat_interleave(self.groups, dim=1), v.repeat_interleave(self.groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)) (Shazeer 2020)."""

    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    """One decoder layer: x + attention(norm(x)), then + feed-forward(norm(.))."""

    def __init__(self, options: Mapping[str, Any]):
        super().__init__()
        hidden, eps = int(options["hidden_size"]), float(options["norm_eps"])
        self.attention_norm = RMSNorm(hidden, eps)
        self.attention = LlamaAttention(hidden, int(options["num_heads"]), int(options["num_kv_heads"]))
        self.ffn_norm = RMSNorm(hidden, eps)
        self.feed_forward = SwiGLU(hidden, int(options["intermediate_size"]))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """Token embedding, the decoder layers, a final RMSNorm and the LM head; forward gives the logits."""

    def __init__(self, options: Mapping[str, Any]):
        super().__init__()
        hidden, vocab = int(options["hidden_size"]), int(options["vocab_size"])
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaBlock(options) for _ in range(int(options["num_layers"])))
        self.norm = RMSNorm(hidden, float(options["norm_eps"]))
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        cos, sin = rotary_tables(int(options["seq_len"]), hidden // int(options["num_heads"]),
                                 float(options["rope_theta"]))
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=INIT_STD)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq = input_ids.shape[1]
        cos, sin = self.rope_cos[:seq], self.rope_sin[:seq]
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def causal_lm_loss(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of every position's prediction of the next token (the last predicts none)."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), input_ids[:, 1:].reshape(-1))
