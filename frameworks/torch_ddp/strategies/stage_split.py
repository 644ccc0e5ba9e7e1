"""Cutting a chain of layers into pipeline stages: by layer count, or by cost (no framework imported here).

A cut is a list of consecutive ``range``s of layer indices, one per stage, that together cover every
layer once, each holding at least one layer. ``by_count`` makes their sizes differ by at most one;
``by_cost`` minimises the largest stage's summed cost (a pipeline's step is paced by its slowest stage).
"""

from __future__ import annotations

from typing import Sequence


def _check(layers: int, stages: int) -> None:
    if stages < 1:
        raise ValueError(f"strategy pipeline: {stages} stages")
    if stages > layers:
        raise ValueError(f"strategy pipeline: {stages} stages for a model of {layers} layers")


def by_count(layers: int, stages: int) -> list[range]:
    """Consecutive layer ranges, one per stage, sizes differing by at most one (earlier stages larger)."""
    _check(layers, stages)
    base, extra = divmod(layers, stages)
    bounds = [0]
    for s in range(stages):
        bounds.append(bounds[-1] + base + (1 if s < extra else 0))
    return [range(bounds[s], bounds[s + 1]) for s in range(stages)]


def stage_costs(costs: Sequence[int], cut: Sequence[range]) -> list[int]:
    """Each stage's summed cost."""
    return [sum(costs[i] for i in part) for part in cut]


def by_cost(costs: Sequence[int], stages: int) -> list[range]:
    """The contiguous cut of layers costing ``costs`` (non-negative integers, e.g. FLOPs) into ``stages``
    non-empty stages whose largest stage cost is the least possible.

    The least largest cost comes from an exact dynamic programme over the prefix sums (O(stages x
    layers^2): a model's few dozen layers). Among the cuts that reach it, the one returned fills the
    stages front to back, each taking as many layers as that cost allows while leaving one for every
    later stage: deterministic, and a layer that costs nothing (an activation function) stays with the
    layer before it."""
    n = len(costs)
    _check(n, stages)
    if any(c < 0 for c in costs):
        raise ValueError("strategy pipeline: layer costs must be non-negative")
    prefix = [0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    # best[j]: least largest stage cost of the first j layers in k stages (k = 1 .. stages)
    best = [prefix[j] if j >= 1 else None for j in range(n + 1)]
    for k in range(2, stages + 1):
        best = [None if j < k else min(max(best[i], prefix[j] - prefix[i]) for i in range(k - 1, j))
                for j in range(n + 1)]
    bound = best[n]
    bounds = [0]
    for s in range(stages - 1):  # the furthest end within the bound that leaves a layer for each later stage
        start, end = bounds[-1], bounds[-1] + 1
        while end < n - (stages - 1 - s) and prefix[end + 1] - prefix[start] <= bound:
            end += 1
        bounds.append(end)
    bounds.append(n)
    return [range(bounds[s], bounds[s + 1]) for s in range(stages)]
