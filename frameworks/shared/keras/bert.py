"""BERT pre-training (MLM + NSP heads) in Keras, shaped as transformers' BertForPreTraining.

Same parameters, layer for layer: word / position (max(512, seq_len)) / token-type (2) embeddings
with LayerNorm; per encoder layer q, k, v and output dense layers with bias, LayerNorm,
intermediate dense + exact GELU, output dense, LayerNorm; a tanh pooler on [CLS]; the MLM head
(dense + GELU + LayerNorm, decoder tied to the word embeddings plus its own vocabulary-sized
bias); the NSP head (hidden -> 2). BERT-base: 110,106,428 trainable parameters. Dropout 0.1 and
LayerNorm epsilon 1e-12 as BertConfig's defaults; weights normal(0, 0.02), biases zero, as
transformers initialises them.
"""

from __future__ import annotations

from typing import Mapping

import keras
from keras import layers, ops

from frameworks.shared.keras.composite import BuiltByFirstCall

LAYER_NORM_EPSILON = 1e-12
DROPOUT = 0.1
INIT_STDDEV = 0.02
MIN_POSITIONS = 512  # BertConfig's max_position_embeddings


def _dense(units: int, activation=None, name: str | None = None) -> layers.Dense:
    return layers.Dense(units, activation=activation, name=name,
                        kernel_initializer=keras.initializers.RandomNormal(stddev=INIT_STDDEV))


def _norm() -> layers.LayerNormalization:
    return layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON)


def _gelu(x):
    return keras.activations.gelu(x, approximate=False)  # transformers' "gelu" is the exact erf form


class Embeddings(BuiltByFirstCall, layers.Layer):
    def __init__(self, vocab_size: int, hidden: int, positions: int, **kwargs):
        super().__init__(**kwargs)
        init = keras.initializers.RandomNormal(stddev=INIT_STDDEV)
        self.word = layers.Embedding(vocab_size, hidden, embeddings_initializer=init)
        self.position = layers.Embedding(positions, hidden, embeddings_initializer=init)
        self.token_type = layers.Embedding(2, hidden, embeddings_initializer=init)
        self.norm, self.dropout = _norm(), layers.Dropout(DROPOUT)

    def call(self, input_ids, token_type_ids, training=None):
        positions = ops.arange(ops.shape(input_ids)[1])
        x = self.word(input_ids) + self.position(positions)[None] + self.token_type(token_type_ids)
        return self.dropout(self.norm(x), training=training)


class SelfAttention(BuiltByFirstCall, layers.Layer):
    """q, k, v projections and softmax(QK^T / sqrt(d)) V over all heads; its output is (n, seq, hidden)."""

    def __init__(self, hidden: int, heads: int, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.head_size = heads, hidden // heads
        self.query, self.key, self.value = _dense(hidden), _dense(hidden), _dense(hidden)
        self.dropout = layers.Dropout(DROPOUT)

    def _split(self, x):
        n, s = ops.shape(x)[0], ops.shape(x)[1]
        return ops.transpose(ops.reshape(x, (n, s, self.heads, self.head_size)), (0, 2, 1, 3))

    def call(self, x, mask_bias, training=None):
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / ops.sqrt(ops.cast(self.head_size, q.dtype))
        probs = self.dropout(ops.softmax(scores + ops.cast(mask_bias, scores.dtype), axis=-1), training=training)
        context = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))
        return ops.reshape(context, (ops.shape(x)[0], ops.shape(x)[1], self.heads * self.head_size))


class EncoderLayer(BuiltByFirstCall, layers.Layer):
    def __init__(self, hidden: int, heads: int, intermediate: int, **kwargs):
        super().__init__(**kwargs)
        self.attention = SelfAttention(hidden, heads)
        self.attention_output, self.attention_norm = _dense(hidden), _norm()
        self.intermediate = _dense(intermediate)
        self.output_dense, self.output_norm = _dense(hidden), _norm()
        self.dropout1, self.dropout2 = layers.Dropout(DROPOUT), layers.Dropout(DROPOUT)

    def call(self, x, mask_bias, training=None):
        attended = self.attention(x, mask_bias, training=training)
        x = self.attention_norm(x + self.dropout1(self.attention_output(attended), training=training))
        inner = _gelu(self.intermediate(x))
        return self.output_norm(x + self.dropout2(self.output_dense(inner), training=training))


class TiedDecoder(layers.Layer):
    """The MLM decoder: hidden -> vocabulary with the word-embedding matrix (tied) and its own bias."""

    def __init__(self, vocab_size: int, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size

    def build(self, input_shape):
        self.bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros", name="bias")

    def call(self, x, embeddings):
        return ops.matmul(x, ops.transpose(ops.cast(embeddings, x.dtype))) + ops.cast(self.bias, x.dtype)


class BertForPreTraining(BuiltByFirstCall, keras.Model):
    """Returns (MLM logits (n, seq, vocab), NSP logits (n, 2))."""

    def __init__(self, options: Mapping[str, int], **kwargs):
        super().__init__(**kwargs)
        hidden, vocab = int(options["hidden_size"]), int(options["vocab_size"])
        self.embeddings = Embeddings(vocab, hidden, max(MIN_POSITIONS, int(options["seq_len"])))
        self.encoder = [EncoderLayer(hidden, int(options["num_heads"]), int(options["intermediate_size"]))
                        for _ in range(int(options["num_layers"]))]
        self.pooler = _dense(hidden, activation="tanh")
        self.transform, self.transform_norm = _dense(hidden), _norm()
        self.decoder = TiedDecoder(vocab)
        self.next_sentence = _dense(2)

    def call(self, inputs, training=None):
        x = self.embeddings(inputs["input_ids"], inputs["token_type_ids"], training=training)
        # additive mask: 0 where attended, a large negative where padded (as transformers does)
        mask_bias = (1.0 - ops.cast(inputs["attention_mask"], "float32"))[:, None, None, :] * -1e9
        for layer in self.encoder:
            x = layer(x, mask_bias, training=training)
        pooled = self.pooler(x[:, 0])
        mlm = self.decoder(self.transform_norm(_gelu(self.transform(x))), self.embeddings.word.embeddings)
        return mlm, self.next_sentence(pooled)
