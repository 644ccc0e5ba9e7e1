"""Cutting a chain of layers into pipeline stages (frameworks/torch_ddp/strategies/stage_split.py, no framework needed):
by cost, the cut is contiguous, covers every layer once, leaves no stage empty, and its largest stage is the
least possible (no larger than the equal-count cut's, equal to a brute-force search's)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, given, settings, strategies as st

from frameworks.torch_ddp.strategies.stage_split import by_cost, by_count, stage_costs

costs_and_stages = st.lists(st.integers(0, 10**6), min_size=1, max_size=24).flatmap(
    lambda costs: st.tuples(st.just(costs), st.integers(1, len(costs))))


def brute_force_best(costs: list[int], stages: int) -> int:
    """The least largest stage cost over every contiguous cut into non-empty stages."""
    n = len(costs)
    return min(max(stage_costs(costs, [range(a, b) for a, b in zip((0, *cuts), (*cuts, n))]))
               for cuts in itertools.combinations(range(1, n), stages - 1))


def assert_is_a_cut(cut: list[range], layers: int, stages: int) -> None:
    assert len(cut) == stages
    assert all(len(part) >= 1 and part.step == 1 for part in cut)  # every stage holds a layer
    assert [i for part in cut for i in part] == list(range(layers))  # contiguous, in order, each layer once


@given(costs_and_stages)
@settings(max_examples=400, deadline=None)
def test_the_cost_cut_covers_every_layer_once_in_non_empty_stages_no_worse_than_the_count_cut(case):
    costs, stages = case
    cut = by_cost(costs, stages)
    assert_is_a_cut(cut, len(costs), stages)
    assert max(stage_costs(costs, cut)) <= max(stage_costs(costs, by_count(len(costs), stages)))


@given(costs_and_stages)
@settings(max_examples=400, deadline=None)
def test_the_cost_cut_reaches_the_brute_force_optimum(case):
    costs, stages = case
    assume(len(costs) <= 10)  # C(9, 4) = 126 cuts at most
    assert max(stage_costs(costs, by_cost(costs, stages))) == brute_force_best(costs, stages)


@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))))
@settings(max_examples=200, deadline=None)
def test_the_count_cut_sizes_differ_by_at_most_one(case):
    layers, stages = case
    cut = by_count(layers, stages)
    assert_is_a_cut(cut, layers, stages)
    assert max(map(len, cut)) - min(map(len, cut)) <= 1


def test_a_heavy_tail_moves_the_cut_and_free_layers_stay_with_the_layer_before():
    # ResNet-like: cheap early layers, heavy late ones; the count cut halves the layers, the cost cut the work
    assert by_count(6, 2) == [range(0, 3), range(3, 6)]
    assert by_cost([1, 1, 1, 1, 1, 5], 2) == [range(0, 5), range(5, 6)]
    # the digits MLP (Linear, ReLU, Linear, ReLU, Linear): a ReLU counts no FLOPs and follows its Linear
    assert by_cost([768, 0, 72, 0, 120], 3) == [range(0, 2), range(2, 4), range(4, 5)]
    assert by_cost([0, 0, 0], 2) == [range(0, 2), range(2, 3)]  # nothing to balance: still every stage a layer


def test_impossible_cuts_are_refused():
    with pytest.raises(ValueError, match="4 stages for a model of 3 layers"):
        by_cost([1, 2, 3], 4)
    with pytest.raises(ValueError, match="non-negative"):
        by_cost([1, -2, 3], 2)
