"""Emulated accelerators with real gradients, for PyTorch DDP and Horovod PyTorch (device emulated,
``exchange = "gradients"``: harness/machines/emulated_cluster.py).

The rank holds the real model's parameters (built as a training rank builds it: the same tensors, sizes
and order) and does none of its math. An emulated step's forward sleeps its share of the profiled
compute time layer by layer; its backward sleeps each layer's share in reverse order and then hands
autograd that layer's gradients (a constant: their values are not what is measured), so that each
gradient is ready when a GPU's backward would have made it. What happens next is the framework's own:
DDP's reducer fills its buckets and starts their allreduce while earlier layers still "compute", a
strategy's comm hook compresses them (1-bit SGD), Horovod's hooks hand them to its background thread's
fusion buffer and cycle, local SGD averages the weights every few steps. The optimizer's update is not
run: on a GPU it is inside the profiled step time, and here it would be this CPU's work, undilated. Its
time is slept after the exchange instead, as the step's ``update_share`` ([emulation]; 0 by default: a GPU's
fused update is well under 1% of its step), since an update waits for the last gradient, and that part of
the step, spread over the backward instead, would hide as much of the exchange behind it.

Shares: each module that owns parameters gets its own FLOPs in one forward pass (torch's FlopCounterMode
on the meta device, at the workload's real input shape; what its submodules count is theirs), the ops of
modules without parameters (activations, pooling, attention's matmuls) spread in proportion; forward 1/3
and backward 2/3 of the step (the equivalence contract's 3 x forward). Every sleep lasts the run's dilation
k times its share; sleeps aim at deadlines from the pass's start, so a late wake-up is caught up and the
time behind schedule (``late_s``: this machine's CPU was short) is counted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from frameworks.shared.emulated_clock import GRADIENT_VALUE, InputClock, LayerClock, StepFactors
from frameworks.shared.pytorch.training import build_model, loss_of
from harness.contract.axes import exchanges_gradients
from harness.contract.equivalence import fixed_batch
from harness.contract.spec import RunSpec


class EmulatedModel(nn.Module):
    """The real model's parameters under a forward and backward that take the profiled time.

    ``forward(*anything)`` ignores its inputs and returns a scalar whose backward produces every
    parameter's gradient at its layer's time. ``model`` stays a submodule, so parameter names, order and
    buffers are the real model's (DDP broadcasts the buffers, a checkpoint holds the real state)."""

    def __init__(self, model: nn.Module, shares: list[float], emulation: Mapping[str, object], factors: StepFactors):
        super().__init__()
        self.model = model
        # the owners, not their parameters: FSDP swaps a module's parameters (sharded, gathered) in and out
        self.owners = _owners(model)
        self.clock = LayerClock(shares, emulation, factors)
        self.carry = torch.zeros(())
        self.spans: dict[int, tuple[nn.Module, int]] = {}  # first owner's index -> (unit, the index after it)
        self.ready_at: Callable[[nn.Module], float] = lambda unit: 0.0

    def run_units(self, units: list[nn.Module], ready_at: Callable[[nn.Module], float]) -> None:
        """Run each of ``units`` (modules whose owners come one after the other) as a call of its own, so that
        its hooks fire around its layers (FSDP's gathers before and reduce-scatters after); each unit's layers,
        forward and backward, begin no sooner than ``ready_at(unit)`` (perf_counter s, once its gather is
        waited for: its parameters' arrival)."""
        index = {id(m): i for i, m in enumerate(self.owners)}
        for unit in units:
            inside = sorted(index[id(m)] for m in _owners(unit))
            if inside != list(range(inside[0], inside[-1] + 1)):
                raise ValueError(f"{type(unit).__name__}: its layers do not run one after the other")
            self.spans[inside[0]] = (unit, inside[-1] + 1)
            unit.forward = functools.partial(self._span, unit, inside[0], inside[-1] + 1)
        self.ready_at = ready_at

    def forward(self, *args, **kwargs) -> torch.Tensor:
        self.clock.start()
        carry, index = self.carry, 0
        while index < len(self.owners):
            unit, after = self.spans.get(index, (None, index + 1))
            carry = unit(carry) if unit is not None else self._layer(carry, index)
            index = after
        return carry

    def _span(self, unit: nn.Module, first: int, after: int, carry: torch.Tensor) -> torch.Tensor:
        """A unit's layers; its forward waits for its parameters (gathered by its pre-forward hook)."""
        self.clock.hold(False, first, self.ready_at(unit))
        for index in range(first, after):
            carry = self._layer(carry, index, unit if index == after - 1 else None)
        return carry

    def _layer(self, carry: torch.Tensor, index: int, unit: nn.Module | None = None) -> torch.Tensor:
        return _TimedLayer.apply(carry, self, index, len(self.owners), unit, *self.owners[index].parameters(recurse=False))

    def update(self) -> None:
        """The update's share of the step, after the exchange has delivered every gradient."""
        self.clock.update()

    @property
    def late_s(self) -> float:
        return self.clock.late_s

    @property
    def factor_sum(self) -> float:
        return self.clock.factor_sum

    @property
    def input(self) -> InputClock | None:
        """The emulated host's loader, which the forward waits for (None without one)."""
        return self.clock.input


class _TimedLayer(torch.autograd.Function):
    """One layer: its forward waits for its forward deadline; its backward for its backward deadline, then
    returns its parameters' gradients (the first layer's backward call begins the backward pass's clock)."""

    @staticmethod
    def forward(ctx, carry, owner, index, count, unit, *params):
        ctx.owner, ctx.position, ctx.unit = owner, count - 1 - index, unit
        ctx.shapes = [(p.shape, p.dtype) for p in params]  # a sharded unit's gathered storage is freed after
        owner.clock.forward(index)
        return carry.clone()

    @staticmethod
    def backward(ctx, grad):
        if ctx.unit is not None:  # a unit's last layer, the first of its backward: its parameters gathered again
            ctx.owner.clock.hold(True, ctx.position, ctx.owner.ready_at(ctx.unit))
        ctx.owner.clock.backward(ctx.position)
        return (grad, None, None, None, None,
                *(torch.full(shape, GRADIENT_VALUE, dtype=dtype) for shape, dtype in ctx.shapes))


def _owners(model: nn.Module) -> list[nn.Module]:
    """The modules that own parameters themselves, in registration order (the forward's, for our models)."""
    return [m for m in model.modules() if any(True for _ in m.parameters(recurse=False))]


def layer_shares(spec: RunSpec) -> list[float]:
    """Each parameter-owning module's share of the step's compute (they sum to 1), from its own forward
    FLOPs counted on the meta device (no memory, no math); by parameter count where no FLOPs are seen."""
    options = dict(spec.workload_options)
    with torch.device("meta"):
        model = build_model(spec.workload, options).eval()  # eval: BatchNorm takes a batch of one at any size
    batch = {k: torch.from_numpy(v).to("meta") for k, v in meta_batch(fixed_batch(spec.workload, options, 1, 0)).items()}
    counter = FlopCounterMode(display=False)
    with counter:
        loss_of(spec.workload, model, batch)  # the call a training step makes
    counts = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    named = dict(model.named_modules())
    owners = _owners(model)
    own = []
    for module in owners:
        name = next(n for n, m in named.items() if m is module)
        total = counts.get(_counter_name(model, name), 0)
        children = sum(counts.get(_counter_name(model, f"{name}.{c}" if name else c), 0)
                       for c, _ in module.named_children())
        own.append(max(0, total - children))
    if sum(own) == 0:
        own = [sum(p.numel() for p in m.parameters(recurse=False)) for m in owners]
    total = sum(own)
    return [o / total for o in own]


def meta_batch(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The batch a FLOP count on the meta device can take: an all-ones ``attention_mask`` (BERT's synthetic
    batch) left out. transformers reads such a mask's values to skip it (``padding_mask.all()``), which a meta
    tensor has none of (``Tensor.item() cannot be called on meta tensors``); without it the model takes the
    same unmasked path, the same matmuls, so the FLOPs are the same."""
    mask = batch.get("attention_mask")
    if mask is not None and bool(np.all(mask == 1)):
        return {k: v for k, v in batch.items() if k != "attention_mask"}
    return dict(batch)


def _counter_name(model: nn.Module, name: str) -> str:
    """FlopCounterMode's key of a submodule: the root's class name, then the dotted path."""
    root = type(model).__name__
    return f"{root}.{name}" if name else root


def build(spec: RunSpec, rank: int) -> EmulatedModel:
    """Rank ``rank``'s emulated model: the real one (the seed's weights) with its layers' shares of the step;
    with ``gradient_scale`` s > 1 in the run's emulation, :func:`scaled_model`."""
    scale = int(spec.emulation.get("gradient_scale", 1))
    model = (build_model(spec.workload, dict(spec.workload_options)) if scale == 1
             else scaled_model(spec, scale))
    return EmulatedModel(model, layer_shares(spec), spec.emulation, StepFactors(spec.emulation, spec.seed, rank))


def scaled_model(spec: RunSpec, scale: int) -> nn.Module:
    """The real model's modules, each parameter a flat tensor of ceil(n / ``scale``) of its n elements (the
    same tensors in the same order, tied ones tied, so DDP's buckets, capped at 1/s of theirs, are as many), the buffers
    full-size (BatchNorm's statistics: small). Built on the meta device first, so that no full-size
    parameter is ever allocated (a rank's memory is what the reduction is for); the values are the seed's
    draws (DDP broadcasts rank 0's)."""
    with torch.device("meta"):
        model = build_model(spec.workload, dict(spec.workload_options))
    generator = torch.Generator().manual_seed(spec.seed)
    made: dict[int, nn.Parameter] = {}  # a tied parameter (BERT's decoder, its word embeddings') stays one
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is not None:
                if id(param) not in made:
                    size = -(-param.numel() // scale)
                    made[id(param)] = nn.Parameter(torch.randn(size, generator=generator) * 0.01)
                module._parameters[name] = made[id(param)]
        for name, buffer in list(module._buffers.items()):
            if buffer is not None:
                module._buffers[name] = torch.zeros(buffer.shape, dtype=buffer.dtype)
    return model


def applies(spec: RunSpec) -> bool:
    """Whether the run's emulated accelerators exchange real gradients (else: a barrier, no model)."""
    return exchanges_gradients(spec.emulation)


def training_step(model: nn.Module, emulated: EmulatedModel, optimizer: torch.optim.Optimizer,
                  next_batch: Callable[[], object], after: Callable[[], None] = lambda: None
                  ) -> Callable[[], torch.Tensor]:
    """An emulated step: the real batch fetched (the loader's work is real), the timed forward and backward
    through ``model`` (DDP's wrapper of ``emulated``, whose backward ends when its last bucket's allreduce
    has), the update's timed share, a strategy's ``after`` (local SGD's averaging); returns the scalar the
    backward ran from. No update is computed (see above)."""

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        next_batch()
        out = model()
        out.backward()
        emulated.update()
        after()
        return out.detach()

    return step
