"""A scenario's strategy options read and checked, and where a strategy's runs can be placed (no framework
imported here).

A scenario overrides a strategy's options in ``[strategy_options.<name>]``; the options' dataclasses are
declared with the strategy (harness.contract.axes.Strategy, harness.contract.strategy_options), and the
resolved options travel to the workers in the spec as a plain mapping. Unknown keys and out-of-range
values are errors, as everywhere else.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from harness.base import config
from harness.base.config import Where
from harness.contract.axes import Strategy
from harness.contract.workloads import classifier_split_reason

# Each strategy's options dataclass, from its declaration.
OPTIONS: dict[Strategy, type] = {strategy: strategy.kind.options for strategy in Strategy}
# Strategies whose processes share one model in one host's memory: a run over several nodes is
# skipped with the reason (and, should a launcher place ranks on several hosts anyway, the workers say so).
ONE_HOST = tuple(strategy for strategy in Strategy if strategy.kind.one_host)


def placement_reason(strategy: Strategy, options: Mapping[str, Any], nodes: int, world_size: int) -> str | None:
    """Why a run of ``strategy`` cannot be placed on ``nodes`` nodes of ``world_size`` processes, or None:
    a one-host strategy on several nodes, more parameter servers than processes to host them, a mesh whose
    model axis does not divide the processes into rows."""
    if strategy in ONE_HOST and nodes > 1:
        return f"strategy {strategy.value} shares one model in one host's memory; the run asks for {nodes} nodes"
    servers = int(options.get("servers", 1))
    if servers > world_size:
        return (f"strategy {strategy.value} with {servers} servers needs as many processes to host them, "
                f"not {world_size}")
    model = int(options.get("model", 1)) if strategy == Strategy.MESH else 1
    if world_size % model:
        return f"strategy mesh: model = {model} does not divide the world size {world_size}"
    return None


def shard_reason(strategy: Strategy, workload_options: Mapping[str, Any], world_size: int) -> str | None:
    """Why a model-parallel split of ``strategy`` does not come out even over ``world_size`` ranks, or None:
    the hybrid's classifier columns (``num_classes``, a ResNet-50 option) must divide by the world size."""
    if strategy == Strategy.HYBRID and "num_classes" in workload_options:
        return classifier_split_reason(int(workload_options["num_classes"]), world_size)
    return None


def parse_options(value: Any, where: Where) -> dict[Strategy, Any]:
    """``[strategy_options.<name>]`` tables -> one frozen options object per strategy named."""
    def options_of(name: str) -> tuple[Strategy, type]:
        strategy = config.convert(name, Strategy, where, name)
        return strategy, OPTIONS[strategy]
    return config.build_tables(value, where, "strategy_options", options_of)


def resolved(strategy: Strategy, overrides: Mapping[Strategy, Any]) -> dict[str, Any]:
    """The options of ``strategy`` for one run (defaults unless overridden), as a plain mapping."""
    return dataclasses.asdict(overrides.get(strategy) or OPTIONS[strategy]())
