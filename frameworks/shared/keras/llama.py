"""The Llama-style decoder in Keras 3, the same model as PyTorch's (frameworks/shared/pytorch/llama.py).

Pre-norm RMSNorm (a learned scale, computed in float32), rotary position embedding on the queries and keys
(the rotate-half form), grouped-query causal self-attention (``num_kv_heads`` key/value heads, each shared by
``num_heads / num_kv_heads`` query heads), a SwiGLU feed-forward, no biases, an untied LM head; weights normal
(0, 0.02). Its parameters and FLOPs, layer by layer, are the PyTorch model's (the equivalence probe checks).
"""

from __future__ import annotations

from typing import Any, Mapping

import keras
import numpy as np
from keras import layers, ops

from frameworks.shared.keras.composite import BuiltByFirstCall

INIT_STDDEV = 0.02


def _dense(units: int) -> layers.Dense:
    return layers.Dense(units, use_bias=False, kernel_initializer=keras.initializers.RandomNormal(stddev=INIT_STDDEV))


class RMSNorm(layers.Layer):
    """x / sqrt(mean(x^2) + eps) x a learned scale, in float32 whatever the policy's compute dtype."""

    def __init__(self, eps: float, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="scale")

    def call(self, x):
        x32 = ops.cast(x, "float32")
        normed = x32 * ops.rsqrt(ops.mean(ops.square(x32), axis=-1, keepdims=True) + self.eps)
        return ops.cast(normed * ops.cast(self.scale, "float32"), x.dtype)


def rotary_tables(seq_len: int, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of every position's rotation angles (seq_len x head_dim), the halves repeated."""
    inverse = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(seq_len, dtype=np.float64), inverse)
    both = np.concatenate([angles, angles], axis=-1)
    return np.cos(both).astype(np.float32), np.sin(both).astype(np.float32)


def rotate(x, cos, sin):
    """Rotary position embedding of ``x`` (batch, heads, seq, head_dim)."""
    half = x.shape[-1] // 2
    rotated = ops.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * ops.cast(cos, x.dtype) + rotated * ops.cast(sin, x.dtype)


class LlamaAttention(BuiltByFirstCall, layers.Layer):
    """q, k, v projections, rotary positions, causal softmax(QK^T / sqrt(d)) V over all query heads (each
    key-value head repeated for its group), the output projection; its output is (n, seq, hidden)."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj, self.o_proj = _dense(hidden), _dense(hidden)
        self.k_proj, self.v_proj = _dense(kv_heads * self.head_dim), _dense(kv_heads * self.head_dim)

    def _split(self, x, heads: int):
        n, s = ops.shape(x)[0], ops.shape(x)[1]
        return ops.transpose(ops.reshape(x, (n, s, heads, self.head_dim)), (0, 2, 1, 3))

    def call(self, x, cos, sin):
        q = rotate(self._split(self.q_proj(x), self.heads), cos, sin)
        k = rotate(self._split(self.k_proj(x), self.kv_heads), cos, sin)
        v = self._split(self.v_proj(x), self.kv_heads)
        groups = self.heads // self.kv_heads
        k, v = ops.repeat(k, groups, axis=1), ops.repeat(v, groups, axis=1)
        seq = ops.shape(x)[1]
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / ops.sqrt(ops.cast(self.head_dim, q.dtype))
        causal = ops.tril(ops.ones((seq, seq), dtype="bool"))
        scores = ops.where(causal[None, None], scores, ops.cast(-1e9 if scores.dtype != "float16" else -6e4,
                                                                  scores.dtype))
        context = ops.transpose(ops.matmul(ops.softmax(scores, axis=-1), v), (0, 2, 1, 3))
        return self.o_proj(ops.reshape(context, (ops.shape(x)[0], seq, self.heads * self.head_dim)))


class LlamaBlock(BuiltByFirstCall, layers.Layer):
    """x + attention(norm(x)), then + down(silu(gate(.)) * up(.)) of norm(.)."""

    def __init__(self, options: Mapping[str, Any], **kwargs):
        super().__init__(**kwargs)
        hidden, eps = int(options["hidden_size"]), float(options["norm_eps"])
        self.attention_norm, self.ffn_norm = RMSNorm(eps), RMSNorm(eps)
        self.attention = LlamaAttention(hidden, int(options["num_heads"]), int(options["num_kv_heads"]))
        ffn = int(options["intermediate_size"])
        self.gate_proj, self.up_proj, self.down_proj = _dense(ffn), _dense(ffn), _dense(hidden)

    def call(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        h = self.ffn_norm(x)
        return x + self.down_proj(ops.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(BuiltByFirstCall, keras.Model):
    """Token ids (n, seq_len) -> next-token logits (n, seq_len, vocab); sequences are always ``seq_len`` long
    here (the synthetic batches are), so the rotary tables are used whole."""

    def __init__(self, options: Mapping[str, Any], **kwargs):
        super().__init__(**kwargs)
        hidden, vocab = int(options["hidden_size"]), int(options["vocab_size"])
        self.embed_tokens = layers.Embedding(vocab, hidden,
                                             embeddings_initializer=keras.initializers.RandomNormal(stddev=INIT_STDDEV))
        self.blocks = [LlamaBlock(options) for _ in range(int(options["num_layers"]))]
        self.norm = RMSNorm(float(options["norm_eps"]))
        self.lm_head = _dense(vocab)
        self.rope_cos, self.rope_sin = rotary_tables(int(options["seq_len"]), hidden // int(options["num_heads"]),
                                                     float(options["rope_theta"]))

    def call(self, input_ids, training=None):  # noqa: ARG002 - no dropout: training changes nothing
        x = self.embed_tokens(input_ids)
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        return self.lm_head(self.norm(x))
