"""The workloads as data: every framework builds the same model from these options.

A size (``tiny``, ``small``, ``full``, ``large``) is a named set of options, not
separate code; a scenario may override single options per workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from harness.base.registry import Registry
from harness.contract.axes import Size, Workload

# ResNet-50 v1.5 has the same parameter count at every input size (global pooling).
_RESNET50 = {
    Size.TINY: {"image_size": 32, "num_classes": 1000},
    Size.SMALL: {"image_size": 64, "num_classes": 1000},
    Size.FULL: {"image_size": 224, "num_classes": 1000},
}

# BertConfig() defaults are BERT-base; "large" is BERT-large; the small ones keep
# the vocabulary (and so the MLM head) so that the model stays BERT-shaped.
_BERT_BASE = {
    "num_layers": 12, "hidden_size": 768, "num_heads": 12, "intermediate_size": 3072,
    "vocab_size": 30522, "seq_len": 128,
}
_BERT = {
    Size.TINY: {**_BERT_BASE, "num_layers": 1, "hidden_size": 64, "num_heads": 2,
                "intermediate_size": 256, "seq_len": 32},
    Size.SMALL: {**_BERT_BASE, "num_layers": 2, "hidden_size": 256, "num_heads": 4,
                 "intermediate_size": 1024},
    Size.FULL: _BERT_BASE,
    Size.LARGE: {**_BERT_BASE, "num_layers": 24, "hidden_size": 1024, "num_heads": 16,
                 "intermediate_size": 4096},
}

# A Llama-style decoder (Touvron et al. 2023; Llama 3, Grattafiori et al. 2024): pre-norm RMSNorm, rotary position
# embedding, SwiGLU feed-forward, grouped-query attention (num_kv_heads key/value heads shared by num_heads query
# heads), no biases, untied input embedding and LM head, a causal language-model loss on synthetic token ids.
# "full" is the Llama 3.1 8B shape (Meta's params.json: dim 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336,
# vocabulary 128,256, rope_theta 500,000, norm_eps 1e-5) at torchtitan's 8,192-token sequences; the small ones
# keep its ratios (4 query heads per KV head, FFN ~ 8/3 x 1.3 dim rounded) at CPU scale.
_LLAMA_8B = {"num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "intermediate_size": 14336,
             "vocab_size": 128256, "seq_len": 8192, "rope_theta": 500000.0, "norm_eps": 1e-5}
_LLAMA = {
    Size.TINY: {**_LLAMA_8B, "num_layers": 2, "hidden_size": 64, "num_heads": 4, "num_kv_heads": 2,
                "intermediate_size": 224, "vocab_size": 512, "seq_len": 32},
    Size.SMALL: {**_LLAMA_8B, "num_layers": 4, "hidden_size": 256, "num_heads": 8, "num_kv_heads": 2,
                 "intermediate_size": 896, "vocab_size": 8192, "seq_len": 128},
    Size.FULL: _LLAMA_8B,
}

# Time-to-accuracy: an MLP on scikit-learn's 8x8 handwritten digits (1,797 images, real data that
# ships inside the package). A fixed 20% of the images is held out and never trained on; every
# ``eval_every`` steps the whole held-out set is evaluated. ``target_accuracy`` is a fraction.
_DIGITS_BASE = {"hidden_size": 64, "lr": 0.2, "momentum": 0.0, "eval_every": 10, "target_accuracy": 0.93}
_DIGITS = {
    Size.TINY: {**_DIGITS_BASE, "hidden_size": 32},
    Size.SMALL: _DIGITS_BASE,
    Size.FULL: {**_DIGITS_BASE, "hidden_size": 256},
}


@dataclass(frozen=True)
class WorkloadInfo:
    name: Workload
    title: str
    sample_unit: str  # what one sample is: "images", "sequences" or "tokens"
    presets: Mapping[Size, Mapping[str, int | float]]
    # where a sample is smaller than what a batch holds (a token of a sequence): the option saying how many
    # samples one batch item counts as (seq_len); None: one item is one sample
    samples_option: str | None = None
    real_data: bool = True  # whether a dataset reader exists (storage other than synthetic): false for llama

    def samples_per_item(self, options: Mapping[str, Any]) -> int:
        """Samples one image or sequence of a batch counts as (a sequence's tokens where samples are tokens)."""
        return int(options[self.samples_option]) if self.samples_option else 1

    def options(self, size: Size, overrides: Mapping[str, Any] | None = None) -> dict[str, int | float]:
        """The resolved options for ``size`` with ``overrides`` applied (already validated)."""
        return {**self.presets[size], **(overrides or {})}


WORKLOADS: dict[Workload, WorkloadInfo] = {
    Workload.RESNET50: WorkloadInfo(Workload.RESNET50, "ResNet-50 v1.5", "images", _RESNET50),
    Workload.BERT: WorkloadInfo(Workload.BERT, "BERT pre-training (MLM + NSP)", "sequences", _BERT),
    Workload.LLAMA: WorkloadInfo(Workload.LLAMA, "Llama-style decoder (causal LM)", "tokens", _LLAMA,
                                 samples_option="seq_len", real_data=False),
    Workload.DIGITS: WorkloadInfo(Workload.DIGITS, "MLP on scikit-learn digits (time-to-accuracy)", "images",
                                  _DIGITS),
}
DECLARATIONS: Registry[WorkloadInfo] = Registry("workload", {w.value: info for w, info in WORKLOADS.items()})

# Reference parameter counts of the full-size models: the equivalence contract.
RESNET50_PARAMS = 25_557_032
BERT_BASE_PRETRAINING_PARAMS = 110_106_428
LLAMA31_8B_PARAMS = 8_030_261_248  # Meta's Llama 3.1 8B (untied embedding and LM head)


def samples_per_step(workload: Workload, options: Mapping[str, Any], batch: int) -> int:
    """The samples a batch of ``batch`` images or sequences counts as (its tokens where samples are tokens):
    what every worker reports per step."""
    return batch * WORKLOADS[workload].samples_per_item(options)


def classifier_split_reason(classes: int, world_size: int) -> str | None:
    """Why strategy hybrid cannot give each of ``world_size`` ranks an equal column shard of a classifier
    with ``classes`` outputs, or None (the planner asks before launching, the worker again before building)."""
    if classes % world_size:
        return (f"strategy hybrid splits the classifier's {classes} classes over the ranks: "
                f"{classes} does not divide by the world size {world_size}")
    return None
