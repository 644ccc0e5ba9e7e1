"""BERT pre-training (Devlin et al. 2019): the encoder with its masked-language-model and next-sentence heads."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from harness.contract.axes import Size, Workload
from harness.contract.workloads.declaration import (
    IGNORED_LABEL,
    MLM_FRACTION,
    Recipe,
    WorkloadInfo,
    attention_record,
    dense_record,
)

# BertConfig() defaults are BERT-base; "large" is BERT-large; the small ones keep
# the vocabulary (and so the MLM head) so that the model stays BERT-shaped.
_BASE = {
    "num_layers": 12, "hidden_size": 768, "num_heads": 12, "intermediate_size": 3072,
    "vocab_size": 30522, "seq_len": 128,
}
PRESETS = {
    Size.TINY: {**_BASE, "num_layers": 1, "hidden_size": 64, "num_heads": 2,
                "intermediate_size": 256, "seq_len": 32},
    Size.SMALL: {**_BASE, "num_layers": 2, "hidden_size": 256, "num_heads": 4,
                 "intermediate_size": 1024},
    Size.FULL: _BASE,
    Size.LARGE: {**_BASE, "num_layers": 24, "hidden_size": 1024, "num_heads": 16,
                 "intermediate_size": 4096},
}
BERT_BASE_PRETRAINING_PARAMS = 110_106_428


def recipe(global_batch: int, options: Mapping[str, Any]) -> Recipe:
    """AdamW lr 1e-4, decoupled decay 0.01 (Devlin et al.)."""
    return Recipe("adamw", lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                  weight_decay_mode="decoupled")


def batch(options: Mapping[str, Any], n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``input_ids``, ``token_type_ids`` (first half 0, second half 1), ``attention_mask`` (all ones), MLM
    ``labels`` (15% of positions, the rest ``IGNORED_LABEL``) and ``next_sentence_label``."""
    seq, vocab = int(options["seq_len"]), int(options["vocab_size"])
    labels = rng.integers(0, vocab, (n, seq), dtype=np.int64)
    labels[rng.random((n, seq)) >= MLM_FRACTION] = IGNORED_LABEL
    labels[:, 0] = rng.integers(0, vocab, n)  # at least one predicted token per sequence
    return {"input_ids": rng.integers(0, vocab, (n, seq), dtype=np.int64),
            "token_type_ids": np.repeat((np.arange(seq) >= seq // 2)[None, :], n, 0).astype(np.int64),
            "attention_mask": np.ones((n, seq), dtype=np.int64),
            "labels": labels,
            "next_sentence_label": rng.integers(0, 2, n, dtype=np.int64)}


def layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The encoder, the pooler, the MLM head (transform and decoder) and the NSP head."""
    h, seq, inter = int(options["hidden_size"]), int(options["seq_len"]), int(options["intermediate_size"])
    per_layer = [dense_record(h, h, seq), dense_record(h, h, seq), dense_record(h, h, seq), attention_record(seq, h),
                 dense_record(h, h, seq), dense_record(h, inter, seq), dense_record(inter, h, seq)]
    heads = [dense_record(h, h, 1), dense_record(h, h, seq), dense_record(h, int(options["vocab_size"]), seq),
             dense_record(h, 2, 1)]
    return per_layer * int(options["num_layers"]) + heads


DECLARATION = WorkloadInfo(
    Workload.BERT, "BERT pre-training (MLM + NSP)", "sequences", PRESETS, recipe=recipe, layers=layers, batch=batch,
    builders={"pytorch": "frameworks.shared.pytorch.workloads.bert",
              "keras": "frameworks.shared.keras.workloads.bert",
              "jax": "frameworks.jax.workloads.bert"},
    published_parameters=BERT_BASE_PRETRAINING_PARAMS)
