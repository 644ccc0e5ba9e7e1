"""A Llama-style decoder (Touvron et al. 2023; Llama 3, Grattafiori et al. 2024): causal LM on synthetic token ids.

Pre-norm RMSNorm, rotary position embedding, SwiGLU feed-forward, grouped-query attention (num_kv_heads key/value
heads shared by num_heads query heads), no biases, untied input embedding and LM head.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from harness.contract.axes import Size, Workload
from harness.contract.workloads.declaration import Recipe, WorkloadInfo, attention_record, dense_record

# "full" is the Llama 3.1 8B shape (Meta's params.json: dim 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336,
# vocabulary 128,256, rope_theta 500,000, norm_eps 1e-5) at torchtitan's 8,192-token sequences; the small ones
# keep its ratios (4 query heads per KV head, FFN ~ 8/3 x 1.3 dim rounded) at CPU scale.
_LLAMA_8B = {"num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "intermediate_size": 14336,
             "vocab_size": 128256, "seq_len": 8192, "rope_theta": 500000.0, "norm_eps": 1e-5}
PRESETS = {
    Size.TINY: {**_LLAMA_8B, "num_layers": 2, "hidden_size": 64, "num_heads": 4, "num_kv_heads": 2,
                "intermediate_size": 224, "vocab_size": 512, "seq_len": 32},
    Size.SMALL: {**_LLAMA_8B, "num_layers": 4, "hidden_size": 256, "num_heads": 8, "num_kv_heads": 2,
                 "intermediate_size": 896, "vocab_size": 8192, "seq_len": 128},
    Size.FULL: _LLAMA_8B,
}
LLAMA31_8B_PARAMS = 8_030_261_248  # Meta's Llama 3.1 8B (untied embedding and LM head)


def recipe(global_batch: int, options: Mapping[str, Any]) -> Recipe:
    """AdamW lr 3e-4, betas (0.9, 0.95), decoupled decay 0.1 (torchtitan's Llama 3 8B recipe, without its warm-up)."""
    return Recipe("adamw", lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                  weight_decay_mode="decoupled")


def batch(options: Mapping[str, Any], n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``input_ids`` only: the causal LM loss predicts each next token of the same ids."""
    return {"input_ids": rng.integers(0, int(options["vocab_size"]), (n, int(options["seq_len"])), dtype=np.int64)}


def layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per layer the q, k, v projections (k and v of the grouped key-value heads), attention over the sequence,
    the output projection and SwiGLU's gate, up and down; then the LM head."""
    h, seq, ffn = int(options["hidden_size"]), int(options["seq_len"]), int(options["intermediate_size"])
    kv = h // int(options["num_heads"]) * int(options["num_kv_heads"])
    per_layer = [dense_record(h, h, seq), dense_record(h, kv, seq), dense_record(h, kv, seq), attention_record(seq, h),
                 dense_record(h, h, seq), dense_record(h, ffn, seq), dense_record(h, ffn, seq),
                 dense_record(ffn, h, seq)]
    return per_layer * int(options["num_layers"]) + [dense_record(h, int(options["vocab_size"]), seq)]


def llama_parameters(options: Mapping[str, Any]) -> int:
    """Trainable parameters: the embedding, per layer the attention's and SwiGLU's weights and two RMSNorm
    scales, the final RMSNorm and the untied LM head (no biases)."""
    h, ffn, vocab = int(options["hidden_size"]), int(options["intermediate_size"]), int(options["vocab_size"])
    kv = h // int(options["num_heads"]) * int(options["num_kv_heads"])
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * ffn + 2 * h
    return vocab * h + int(options["num_layers"]) * per_layer + h + h * vocab


# The probe builds at most "small": Llama 3.1 8B holds 32 GB of fp32 weights (no CPU test builds it); asked for a
# larger size it checks the parameters against llama_parameters, itself held to the published count at full.
DECLARATION = WorkloadInfo(
    Workload.LLAMA, "Llama-style decoder (causal LM)", "tokens", PRESETS, recipe=recipe, layers=layers, batch=batch,
    builders={"pytorch": "frameworks.shared.pytorch.workloads.llama",
              "keras": "frameworks.shared.keras.workloads.llama",
              "jax": "frameworks.jax.workloads.llama"},
    samples_option="seq_len", real_data=False, published_parameters=LLAMA31_8B_PARAMS,
    counted_parameters=llama_parameters, probe_size_cap=Size.SMALL)
