"""The Llama-style decoder in Flax (linen), the same model as PyTorch's (frameworks/shared/pytorch/llama.py) and
Keras's (frameworks/shared/keras/llama.py).

Pre-norm RMSNorm (a learned scale, computed in float32), rotary position embedding on the queries and keys (the
rotate-half form), grouped-query causal self-attention (``num_kv_heads`` key/value heads, each shared by
``num_heads / num_kv_heads`` query heads, repeated as torch's ``repeat_interleave``), a SwiGLU feed-forward, no
biases, an untied LM head; weights normal(0, 0.02). The loss: the mean cross-entropy of every position's
prediction of the next token (causal LM).
"""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from frameworks.jax.workloads.init import INIT_STD, cross_entropy, normal_variables

NORMAL = nn.initializers.normal(INIT_STD)


def _dense(features: int, name: str) -> nn.Dense:
    return nn.Dense(features, use_bias=False, kernel_init=NORMAL, name=name)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) x a learned scale (Zhang and Sennrich 2019), computed in float32."""

    eps: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        scale = self.param("scale", nn.initializers.ones, (x.shape[-1],))
        x32 = x.astype(jnp.float32)
        return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps) * scale).astype(x.dtype)


def rotary_tables(seq_len: int, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of every position's rotation angles (seq_len x head_dim), the halves repeated."""
    inverse = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    both = np.tile(np.outer(np.arange(seq_len, dtype=np.float64), inverse), 2)
    return np.cos(both).astype(np.float32), np.sin(both).astype(np.float32)


def rotate(x: jax.Array, cos: np.ndarray, sin: np.ndarray) -> jax.Array:
    """Rotary position embedding of ``x`` (batch, seq, heads, head_dim): each pair (i, i + d/2) rotated."""
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]


class LlamaAttention(nn.Module):
    """Causal grouped-query self-attention with rotary positions on the queries and keys; (n, seq, hidden) out."""

    hidden: int
    heads: int
    kv_heads: int
    theta: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        n, seq, size = x.shape[0], x.shape[1], self.hidden // self.heads
        cos, sin = rotary_tables(seq, size, self.theta)
        q = rotate(_dense(self.hidden, "q_proj")(x).reshape(n, seq, self.heads, size), cos, sin)
        k = rotate(_dense(self.kv_heads * size, "k_proj")(x).reshape(n, seq, self.kv_heads, size), cos, sin)
        v = _dense(self.kv_heads * size, "v_proj")(x).reshape(n, seq, self.kv_heads, size)
        groups = self.heads // self.kv_heads
        k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
        scores = jnp.einsum("nqhd,nkhd->nhqk", q, k).astype(jnp.float32) / np.sqrt(size)
        scores = jnp.where(np.tril(np.ones((seq, seq), bool))[None, None], scores, -1e9)
        probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
        out = jnp.einsum("nhqk,nkhd->nqhd", probs, v).reshape(n, seq, self.hidden)
        return _dense(self.hidden, "o_proj")(out)


class LlamaBlock(nn.Module):
    """One decoder layer: x + attention(norm(x)), then + SwiGLU(norm(.)) = down(silu(gate(.)) * up(.))."""

    options: Mapping[str, Any]

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        o = self.options
        hidden, eps, ffn = int(o["hidden_size"]), float(o["norm_eps"]), int(o["intermediate_size"])
        x = x + LlamaAttention(hidden, int(o["num_heads"]), int(o["num_kv_heads"]), float(o["rope_theta"]),
                               name="attention")(RMSNorm(eps, name="attention_norm")(x))
        h = RMSNorm(eps, name="ffn_norm")(x)
        return x + _dense(hidden, "down_proj")(nn.silu(_dense(ffn, "gate_proj")(h)) * _dense(ffn, "up_proj")(h))


class Llama(nn.Module):
    """Token embedding, the decoder layers, a final RMSNorm and the LM head; the logits."""

    options: Mapping[str, Any]

    @nn.compact
    def __call__(self, input_ids: jax.Array) -> jax.Array:
        o = self.options
        x = nn.Embed(int(o["vocab_size"]), int(o["hidden_size"]), embedding_init=NORMAL, name="embed_tokens")(input_ids)
        for index in range(int(o["num_layers"])):
            x = LlamaBlock(o, name=f"layer{index}")(x)
        return _dense(int(o["vocab_size"]), "lm_head")(RMSNorm(float(o["norm_eps"]), name="norm")(x))


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return Llama(dict(options))


def init_variables(model: nn.Module, options: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The parameters from ``seed``, as NumPy arrays (normal(0, 0.02) projections and embedding, unit scales)."""
    ids = jnp.zeros((1, int(options["seq_len"])), jnp.int32)
    return normal_variables(lambda: model.init(jax.random.PRNGKey(0), ids), seed)


def to_jax(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"input_ids": batch["input_ids"].astype(np.int32)}


def forward(model: nn.Module, variables: Mapping[str, Any], batch: Mapping[str, jax.Array]) -> jax.Array:
    return model.apply(dict(variables), batch["input_ids"])


def loss_of(model: nn.Module, params: Any, state: Mapping[str, Any], batch: Mapping[str, jax.Array],
            rng: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    """Mean cross-entropy of each position's prediction of the next token; ``state`` (empty) and ``rng`` unused."""
    ids = batch["input_ids"]
    return cross_entropy(model.apply({"params": params}, ids)[:, :-1], ids[:, 1:]), dict(state)
