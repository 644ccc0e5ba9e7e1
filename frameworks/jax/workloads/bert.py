"""BERT pre-training (MLM + NSP heads) in Flax (linen), shaped as transformers' BertForPreTraining (the torch
frameworks') and frameworks/shared/keras/bert.py.

Same parameters, layer for layer: word / position (max(512, seq_len)) / token-type (2) embeddings with LayerNorm;
per encoder layer q, k, v and output dense layers with bias, LayerNorm, intermediate dense + exact GELU, output
dense, LayerNorm; a tanh pooler on [CLS]; the MLM head (dense + GELU + LayerNorm, the decoder tied to the word
embeddings (``Embed.attend``) plus its own vocabulary-sized bias); the NSP head (hidden -> 2). BERT-base:
110,106,428 trainable parameters. Dropout 0.1 and LayerNorm epsilon 1e-12 as BertConfig's defaults; weights
normal(0, 0.02), biases zero, as transformers initializes them. The loss is BertForPreTraining's: the MLM
cross-entropy averaged over the predicted tokens (label IGNORED_LABEL skipped) plus the mean NSP cross-entropy.
"""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from frameworks.jax.workloads.init import INIT_STD, cross_entropy, normal_variables
from harness.contract.equivalence import IGNORED_LABEL

LAYER_NORM_EPSILON = 1e-12
DROPOUT = 0.1
MIN_POSITIONS = 512  # BertConfig's max_position_embeddings
NORMAL = nn.initializers.normal(INIT_STD)
INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def _dense(features: int, name: str) -> nn.Dense:
    return nn.Dense(features, kernel_init=NORMAL, name=name)


def _norm(name: str) -> nn.LayerNorm:
    return nn.LayerNorm(epsilon=LAYER_NORM_EPSILON, name=name)


def _gelu(x: jax.Array) -> jax.Array:
    return nn.gelu(x, approximate=False)  # transformers' "gelu" is the exact erf form


class SelfAttention(nn.Module):
    """q, k, v projections and softmax(QK^T / sqrt(d) + mask) V over all heads; its output is (n, seq, hidden)."""

    hidden: int
    heads: int

    @nn.compact
    def __call__(self, x: jax.Array, mask_bias: jax.Array, deterministic: bool) -> jax.Array:
        n, seq, size = x.shape[0], x.shape[1], self.hidden // self.heads
        q, k, v = (_dense(self.hidden, name)(x).reshape(n, seq, self.heads, size) for name in ("query", "key", "value"))
        scores = jnp.einsum("nqhd,nkhd->nhqk", q, k) / np.sqrt(size) + mask_bias
        probs = nn.Dropout(DROPOUT)(jax.nn.softmax(scores, axis=-1), deterministic=deterministic)
        return jnp.einsum("nhqk,nkhd->nqhd", probs, v).reshape(n, seq, self.hidden)


class EncoderLayer(nn.Module):
    hidden: int
    heads: int
    intermediate: int

    @nn.compact
    def __call__(self, x: jax.Array, mask_bias: jax.Array, deterministic: bool) -> jax.Array:
        attended = SelfAttention(self.hidden, self.heads, name="attention")(x, mask_bias, deterministic)
        attended = nn.Dropout(DROPOUT)(_dense(self.hidden, "attention_output")(attended), deterministic=deterministic)
        x = _norm("attention_norm")(x + attended)
        inner = _gelu(_dense(self.intermediate, "intermediate")(x))
        out = nn.Dropout(DROPOUT)(_dense(self.hidden, "output")(inner), deterministic=deterministic)
        return _norm("output_norm")(x + out)


class BertForPreTraining(nn.Module):
    """Returns (MLM logits (n, seq, vocab), NSP logits (n, 2))."""

    options: Mapping[str, int]

    @nn.compact
    def __call__(self, input_ids: jax.Array, token_type_ids: jax.Array, attention_mask: jax.Array,
                 deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
        o = self.options
        hidden, vocab, seq = int(o["hidden_size"]), int(o["vocab_size"]), input_ids.shape[1]
        word = nn.Embed(vocab, hidden, embedding_init=NORMAL, name="word_embeddings")
        positions = nn.Embed(max(MIN_POSITIONS, int(o["seq_len"])), hidden, embedding_init=NORMAL,
                             name="position_embeddings")
        types = nn.Embed(2, hidden, embedding_init=NORMAL, name="token_type_embeddings")
        x = word(input_ids) + positions(jnp.arange(seq))[None] + types(token_type_ids)
        x = nn.Dropout(DROPOUT)(_norm("embeddings_norm")(x), deterministic=deterministic)
        # additive mask: 0 where attended, a large negative where padded (as transformers does)
        mask_bias = (1.0 - attention_mask.astype(jnp.float32))[:, None, None, :] * -1e9
        for index in range(int(o["num_layers"])):
            x = EncoderLayer(hidden, int(o["num_heads"]), int(o["intermediate_size"]), name=f"layer{index}")(
                x, mask_bias, deterministic)
        pooled = jnp.tanh(_dense(hidden, "pooler")(x[:, 0]))
        transformed = _norm("transform_norm")(_gelu(_dense(hidden, "transform")(x)))
        mlm = word.attend(transformed) + self.param("decoder_bias", nn.initializers.zeros, (vocab,))
        return mlm, _dense(2, "next_sentence")(pooled)


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return BertForPreTraining({k: int(v) for k, v in options.items()})


def init_variables(model: nn.Module, options: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The parameters from ``seed``, as NumPy arrays (normal(0, 0.02) weights, zero biases, unit LayerNorms)."""
    ids = jnp.zeros((1, int(options["seq_len"])), jnp.int32)
    return normal_variables(lambda: model.init(jax.random.PRNGKey(0), ids, ids, ids), seed)


def to_jax(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The fixed batch's integers as int32 (JAX's default integer)."""
    return {k: v.astype(np.int32) for k, v in batch.items()}


def forward(model: nn.Module, variables: Mapping[str, Any], batch: Mapping[str, jax.Array]) -> Any:
    return model.apply(dict(variables), *(batch[k] for k in INPUTS))


def loss_of(model: nn.Module, params: Any, state: Mapping[str, Any], batch: Mapping[str, jax.Array],
            rng: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    """BertForPreTraining's loss in training mode (dropout drawn from ``rng``); ``state`` (empty) unchanged."""
    mlm, nsp = model.apply({"params": params}, *(batch[k] for k in INPUTS), deterministic=False,
                           rngs={"dropout": rng})
    loss = cross_entropy(mlm, batch["labels"], IGNORED_LABEL) + cross_entropy(nsp, batch["next_sentence_label"])
    return loss, dict(state)
