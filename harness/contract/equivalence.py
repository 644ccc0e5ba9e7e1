"""The equivalence contract: what makes "the same workload" a checked fact across frameworks.

Every framework's worker trains with :func:`recipe` (optimizer, learning rate, weight decay)
on :func:`fixed_batch` synthetic data, and every framework sub-package has a ``probe.py``
whose ``probe(workload, options, steps, seed)`` reports, read back from its own objects:

- ``parameters``: trainable parameter count;
- ``layers``: the FLOP-carrying ops of one forward pass of one sample (``conv``, ``dense``,
  ``attention`` records, see :func:`flops_per_sample`), compared as a multiset;
- ``optimizer``: what its optimizer object holds (see :func:`recipe`'s fields);
- ``losses``: training losses on the fixed batch, which must decrease.

:func:`check` compares one framework's probe with the reference (torch_ddp's probe and the
published parameter counts) and returns every difference, so a drifted model fails loudly.
No deep-learning framework is imported here: probes run in the frameworks' own processes
(``python -m harness.running.probe``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np

from harness.contract.axes import Workload

PROBE_FORMAT = 1
REFERENCE_FRAMEWORK = "torch_ddp"
MLM_FRACTION = 0.15  # share of tokens the masked-language-model loss predicts (Devlin et al.)
IGNORED_LABEL = -100  # label of tokens the MLM loss skips (transformers' convention)


@dataclass(frozen=True)
class Recipe:
    """The training recipe of a workload; every framework builds its optimizer from it.

    ``weight_decay_mode``: ``l2_coupled`` adds ``weight_decay * w`` to each gradient before the
    optimizer's update (PyTorch SGD); ``decoupled`` shrinks weights by ``lr * weight_decay``
    apart from the gradient (AdamW). Applied to all trainable parameters. Constant learning rate.
    """

    name: str  # "sgd" | "adamw"
    lr: float
    weight_decay: float
    weight_decay_mode: str
    momentum: float | None = None
    nesterov: bool | None = None
    betas: tuple[float, float] | None = None
    eps: float | None = None
    schedule: str = "constant"

    def as_probe(self) -> dict[str, Any]:
        """The fields a probe reports (``schedule`` is not read back from optimizer objects)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()
                if v is not None and k != "schedule"}


def recipe(workload: Workload, global_batch: int, options: Mapping[str, Any] | None = None) -> Recipe:
    """ResNet: SGD with momentum, lr 0.1 x global_batch / 256 (Goyal et al. 2017), L2 1e-4.
    BERT: AdamW lr 1e-4, decoupled decay 0.01 (Devlin et al.). Llama: AdamW lr 3e-4, betas (0.9, 0.95),
    decoupled decay 0.1 (torchtitan's Llama 3 8B recipe, without its warm-up). Digits: plain SGD from its options."""
    if workload == Workload.RESNET50:
        return Recipe("sgd", lr=0.1 * global_batch / 256, momentum=0.9, nesterov=False,
                      weight_decay=1e-4, weight_decay_mode="l2_coupled")
    if workload == Workload.BERT:
        return Recipe("adamw", lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                      weight_decay_mode="decoupled")
    if workload == Workload.LLAMA:
        return Recipe("adamw", lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                      weight_decay_mode="decoupled")
    opts = options or {}
    return Recipe("sgd", lr=float(opts.get("lr", 0.2)), momentum=float(opts.get("momentum", 0.0)),
                  nesterov=False, weight_decay=0.0, weight_decay_mode="l2_coupled")


def fixed_batch(workload: Workload, options: Mapping[str, Any], batch_size: int, seed: int) -> dict[str, np.ndarray]:
    """A deterministic synthetic batch, identical in every framework for the same seed.

    Images are NCHW float32 (standard normal), labels int64; BERT batches hold ``input_ids``,
    ``token_type_ids`` (first half 0, second half 1), ``attention_mask`` (all ones), MLM
    ``labels`` (15% of positions, the rest ``IGNORED_LABEL``) and ``next_sentence_label``; Llama batches
    hold ``input_ids`` only (the causal LM loss predicts each next token of the same ids).
    """
    rng = np.random.default_rng(seed)
    n = batch_size
    if workload == Workload.RESNET50:
        size = int(options["image_size"])
        return {"images": rng.standard_normal((n, 3, size, size), dtype=np.float32),
                "labels": rng.integers(0, int(options["num_classes"]), n, dtype=np.int64)}
    if workload == Workload.LLAMA:
        return {"input_ids": rng.integers(0, int(options["vocab_size"]), (n, int(options["seq_len"])), dtype=np.int64)}
    if workload != Workload.BERT:
        raise ValueError(f"no synthetic batch for workload {workload.value}")
    seq, vocab = int(options["seq_len"]), int(options["vocab_size"])
    labels = rng.integers(0, vocab, (n, seq), dtype=np.int64)
    labels[rng.random((n, seq)) >= MLM_FRACTION] = IGNORED_LABEL
    labels[:, 0] = rng.integers(0, vocab, n)  # at least one predicted token per sequence
    return {"input_ids": rng.integers(0, vocab, (n, seq), dtype=np.int64),
            "token_type_ids": np.repeat((np.arange(seq) >= seq // 2)[None, :], n, 0).astype(np.int64),
            "attention_mask": np.ones((n, seq), dtype=np.int64),
            "labels": labels,
            "next_sentence_label": rng.integers(0, 2, n, dtype=np.int64)}


def layer_flops(layer: Mapping[str, Any]) -> int:
    """Forward FLOPs of one probe layer record for one sample (2 per multiply-add).

    ``conv``: 2 x C_in/groups x K x kh x kw x h_out x w_out; ``dense``: 2 x in x out x rows;
    ``attention``: QK^T and AV, 2 x 2 x seq_len^2 x hidden.
    """
    op = layer["op"]
    if op == "conv":
        kh, kw = layer["kernel"]
        h, w = layer["out_hw"]
        return 2 * layer["in_channels"] // layer["groups"] * layer["out_channels"] * kh * kw * h * w
    if op == "dense":
        return 2 * layer["in_features"] * layer["out_features"] * layer["rows"]
    if op == "attention":
        return 4 * layer["seq_len"] ** 2 * layer["hidden"]
    raise ValueError(f"unknown layer op {op!r} in a probe")


def flops_per_sample(layers: list[Mapping[str, Any]]) -> int:
    """Forward FLOPs per sample of a model from its probe's layer records, the same way for all."""
    return sum(layer_flops(layer) for layer in layers)


def _layer_differences(layers: list[Mapping[str, Any]], reference: list[Mapping[str, Any]]) -> list[str]:
    """Layer records one side has more of than the other. Compared as multisets: frameworks may run
    independent ops in another order (a shortcut before or after its block's main path)."""
    def counts(records: list[Mapping[str, Any]]) -> Counter:
        return Counter(json.dumps(dict(r), sort_keys=True) for r in records)

    mine, theirs = counts(layers), counts(reference)
    extra, missing = mine - theirs, theirs - mine
    problems = [f"{n} x layer {record} that {REFERENCE_FRAMEWORK} does not have" for record, n in extra.items()]
    problems += [f"{n} x layer {record} of {REFERENCE_FRAMEWORK} missing" for record, n in missing.items()]
    return problems


def _optimizer_differences(found: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    problems = []
    for key, want in expected.items():
        got = found.get(key)
        same = (got == want if isinstance(want, (str, bool)) or got is None
                else np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=1e-6, atol=0))
        if not same:
            problems.append(f"optimizer {key} is {got!r}, the recipe says {want!r}")
    return problems


def check(probe: Mapping[str, Any], reference: Mapping[str, Any], expected_recipe: Recipe,
          expected_parameters: int | None = None) -> list[str]:
    """Every way ``probe`` departs from the contract (empty when equivalent).

    ``reference`` is the reference framework's probe of the same workload and options;
    ``expected_parameters`` the published count where one exists (full-size models).
    """
    problems = []
    if expected_parameters is not None and probe["parameters"] != expected_parameters:
        problems.append(f"{probe['parameters']:,} parameters, the reference model has {expected_parameters:,}")
    if probe["parameters"] != reference["parameters"]:
        problems.append(f"{probe['parameters']:,} parameters, {REFERENCE_FRAMEWORK} has {reference['parameters']:,}")
    flops, reference_flops = flops_per_sample(probe["layers"]), flops_per_sample(reference["layers"])
    if flops != reference_flops:
        problems.append(f"{flops:,} forward FLOPs per sample, {REFERENCE_FRAMEWORK} has {reference_flops:,}")
    problems += _layer_differences(probe["layers"], reference["layers"])
    problems += _optimizer_differences(probe["optimizer"], expected_recipe.as_probe())
    losses = probe["losses"]  # a probe run without training steps has none to check
    if losses and not all(np.isfinite(losses)):
        problems.append(f"non-finite training loss on the fixed batch: {losses}")
    elif losses and (len(losses) < 2 or not losses[-1] < losses[0]):
        problems.append(f"the training loss on the fixed batch does not decrease: {losses}")
    return problems


PROBE_BATCH = 4  # samples of the fixed batch a probe trains on
PROBE_GLOBAL_BATCH = 256  # the global batch a probe builds its optimizer for (ResNet lr 0.1)


def probe_recipe(workload: Workload, options: Mapping[str, Any] | None = None) -> Recipe:
    """The recipe a probe builds its optimizer from: the workers' recipe at a global batch of 256."""
    return recipe(workload, PROBE_GLOBAL_BATCH, options)


def rows_per_sample(output_elements: int, batch: int, out_features: int) -> int:
    """How many times a dense layer ran per sample, from its output's size (1 for a classifier
    head, the sequence length for a token-wise layer): the ``rows`` of a ``dense`` record."""
    return output_elements // (batch * out_features)
