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
from typing import Any, Mapping

import numpy as np

from harness.contract.workloads import DECLARATIONS
from harness.contract.workloads.declaration import IGNORED_LABEL, MLM_FRACTION, Recipe

__all__ = ["IGNORED_LABEL", "MLM_FRACTION", "PROBE_FORMAT", "REFERENCE_FRAMEWORK", "Recipe", "check", "fixed_batch",
           "flops_per_sample", "layer_flops", "probe_recipe", "recipe", "rows_per_sample"]

PROBE_FORMAT = 1
REFERENCE_FRAMEWORK = "torch_ddp"


def recipe(workload: Any, global_batch: int, options: Mapping[str, Any] | None = None) -> Recipe:
    """The workload's training recipe (its declaration's, harness.contract.workloads) at ``global_batch``."""
    return DECLARATIONS[workload].recipe(global_batch, options or {})


def fixed_batch(workload: Any, options: Mapping[str, Any], batch_size: int, seed: int) -> dict[str, np.ndarray]:
    """A deterministic synthetic batch, identical in every framework for the same seed (its declaration's
    ``batch``: images NCHW float32, integers int64)."""
    info = DECLARATIONS[workload]
    if info.batch is None:
        raise ValueError(f"no synthetic batch for workload {getattr(workload, 'value', workload)}")
    return info.batch(options, batch_size, np.random.default_rng(seed))


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


def probe_recipe(workload: Any, options: Mapping[str, Any] | None = None) -> Recipe:
    """The recipe a probe builds its optimizer from: the workers' recipe at a global batch of 256."""
    return recipe(workload, PROBE_GLOBAL_BATCH, options)


def rows_per_sample(output_elements: int, batch: int, out_features: int) -> int:
    """How many times a dense layer ran per sample, from its output's size (1 for a classifier
    head, the sequence length for a token-wise layer): the ``rows`` of a ``dense`` record."""
    return output_elements // (batch * out_features)
