"""What a workload declares: every fact the harness and the frameworks know about it, in one frozen object.

A workload is a plug-in: one module under harness/contract/workloads/ holding its ``DECLARATION`` (presets,
sample unit, training recipe, fixed batch, FLOP-carrying layers, parameter facts, and per framework family
the module path of its model builder) and one line in harness/contract/workloads/__init__.py's ``REGISTRY``;
each family's builder module lives with that family's shared code (frameworks/shared/pytorch/workloads/, ...).
Nothing here imports a framework: a builder is a module path, imported by the worker only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

import numpy as np

from harness.base.errors import UserError
from harness.contract.axes import Size

MLM_FRACTION = 0.15  # share of tokens the masked-language-model loss predicts (Devlin et al.)
IGNORED_LABEL = -100  # label of tokens the MLM loss skips (transformers' convention)

# A family: frameworks that share one model code (a framework says its own in FrameworkInfo.family). Its value is
# what a workload's builder module for that family defines; a new family (JAX) is one line here.
FAMILIES: dict[str, tuple[str, ...]] = {
    # build_model(options) -> torch.nn.Module; loss_of(model, batch of tensors) -> scalar loss tensor
    "pytorch": ("build_model", "loss_of"),
    # build_model(options) -> keras.Model (variables made by the caller's dummy call where the workload has a
    # fixed batch); model_inputs(batch) -> the model's input; loss_of(model, batch, training) -> scalar loss
    "keras": ("build_model", "model_inputs", "loss_of"),
    # build_model(options) -> chainer.Chain; loss_of(model, images, labels) (chainer's own worker calls it)
    "chainer": ("build_model", "loss_of"),
    # build_model(options) -> flax.linen.Module; init_variables(model, options, seed) -> NumPy variables; to_jax(batch)
    # -> the batch in the model's layout; forward(model, variables, batch); loss_of(model, params, state, batch, rng)
    # -> (loss, state) (frameworks/jax/workloads/)
    "jax": ("build_model", "init_variables", "to_jax", "forward", "loss_of"),
}
SAMPLE_UNITS = ("images", "sequences", "tokens")


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


Options = Mapping[str, Any]
Layers = list[dict[str, Any]]


@dataclass(frozen=True)
class WorkloadInfo:
    """One workload, declared once. ``name`` is its registry name (a ``Workload`` member for the built-in ones)."""

    name: Any  # a str-Enum member or a str: the scenario's and the row's ``workload``
    title: str
    sample_unit: str  # what one sample is: "images", "sequences" or "tokens" (SAMPLE_UNITS)
    presets: Mapping[Size, Mapping[str, int | float]]
    # (global batch in samples of a step, options) -> the recipe every framework's optimizer is built from
    recipe: Callable[[int, Options], Recipe]
    # options -> the FLOP-carrying layer records of one forward pass of one image or sequence (``conv``, ``dense``,
    # ``attention``: harness.contract.equivalence.layer_flops): the model FLOPs, and what a probe must read back
    layers: Callable[[Options], Layers]
    # framework family (FAMILIES) -> module path of its model builder, imported by the worker, never the harness
    builders: Mapping[str, str]
    # (options, batch size, numpy Generator) -> the fixed synthetic batch (numpy arrays; images NCHW float32,
    # integers int64); None: the workload trains on its own real data only (digits)
    batch: Callable[[Options, int, np.random.Generator], dict[str, np.ndarray]] | None = None
    # where a sample is smaller than what a batch holds (a token of a sequence): the option saying how many
    # samples one batch item counts as (seq_len); None: one item is one sample
    samples_option: str | None = None
    real_data: bool = True  # whether a dataset reader exists (storage other than synthetic): false for llama
    published_parameters: int | None = None  # the full-size model's published trainable parameter count
    # the trainable parameters counted from the options, where the harness counts them exactly (embeddings
    # included): what a probe at a capped size must read back, and the gradient an emulation sizes
    counted_parameters: Callable[[Options], int] | None = None
    probe_size_cap: Size | None = None  # the largest size a probe builds (a larger one builds this)

    def __post_init__(self) -> None:
        if self.sample_unit not in SAMPLE_UNITS:
            raise ValueError(f"workload {self.name}: sample unit {self.sample_unit!r}, not one of {SAMPLE_UNITS}")
        unknown = sorted(set(self.builders) - set(FAMILIES))
        if unknown:
            raise ValueError(f"workload {self.name}: builders for unknown families {unknown}; known: {list(FAMILIES)}")

    def samples_per_item(self, options: Mapping[str, Any]) -> int:
        """Samples one image or sequence of a batch counts as (a sequence's tokens where samples are tokens)."""
        return int(options[self.samples_option]) if self.samples_option else 1

    def options(self, size: Size, overrides: Mapping[str, Any] | None = None) -> dict[str, int | float]:
        """The resolved options for ``size`` with ``overrides`` applied (already validated)."""
        return {**self.presets[size], **(overrides or {})}

    def builder(self, family: str) -> str:
        """The module path of this workload's model builder in ``family`` (a UserError naming those it has)."""
        if family not in self.builders:
            label = getattr(self.name, "value", self.name)
            raise UserError(f"workload {label}: no {family} model; it has: {', '.join(self.builders) or 'none'}")
        return self.builders[family]


# Layer records, as a probe reports them (harness.contract.equivalence.layer_flops counts them).
def conv_record(c_in: int, c_out: int, k: int, stride: int, out: int) -> dict[str, Any]:
    return {"op": "conv", "in_channels": c_in, "out_channels": c_out, "kernel": [k, k], "stride": [stride, stride],
            "groups": 1, "out_hw": [out, out]}


def dense_record(n_in: int, n_out: int, rows: int) -> dict[str, Any]:
    return {"op": "dense", "in_features": n_in, "out_features": n_out, "rows": rows}


def attention_record(seq_len: int, hidden: int) -> dict[str, Any]:
    return {"op": "attention", "seq_len": seq_len, "hidden": hidden}


def conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    """A convolution's (or pooling's) output height or width."""
    return (size + 2 * padding - kernel) // stride + 1
