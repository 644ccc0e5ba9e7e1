"""Expand a scenario's matrix into runs: product of axes, less exclusions, plus inclusions."""

from __future__ import annotations

from typing import Any, Mapping

import frameworks
from harness import launchers
from harness.contract.axes import Rules
from harness.contract.spec import RunSpec
from harness.contract.workloads import WORKLOADS
from harness.experiment import strategies
from harness.experiment.scenario import Scenario, combinations
from harness.machines import accelerators, faults


def expand(scenario: Scenario) -> list[RunSpec]:
    """All runs of a scenario, repeats interleaved (every configuration once, then again)
    so that slow drift of the machine spreads over configurations instead of biasing one; under
    mlperf_storage rules a configuration's runs follow each other, each with its own seed."""
    configs = []
    for combo in combinations(scenario):
        info = WORKLOADS[combo["workload"]]
        options = info.options(combo["size"], scenario.workload_options.get(combo["workload"]))
        combo = {**combo, "launcher": _launcher(combo)}
        launcher_options = scenario.launcher_options.get(combo["launcher"])
        if launcher_options is None:
            launcher_options = launchers.module(combo["launcher"]).Options()
        configs.append((combo, options, launchers.options_as_data(launcher_options)))
    s = scenario.settings
    mlperf = s.rules == Rules.MLPERF_STORAGE
    # MLPerf Storage's runs of one configuration follow each other (a warm-up run, then 5, with nothing in
    # between) and each has a new seed; ours interleave the repeats and share the scenario's seed
    order = ([(repeat, config) for config in configs for repeat in range(s.repeats)] if mlperf else
             [(repeat, config) for repeat in range(s.repeats) for config in configs])
    return [
        RunSpec(scenario=scenario.name, workload_options=options, repeat=repeat,
                warmup_steps=s.warmup_steps, measured_steps=s.measured_steps, timeout_s=s.timeout_s,
                device=s.device, seed=(s.seed + repeat) % 2**32 if mlperf else s.seed, rules=s.rules,
                launcher_options=launcher_options,
                strategy_options=strategies.resolved(combo["strategy"], scenario.strategy_options),
                storage_options=storage_as_data(combo["storage"], scenario.storage_options),
                emulation=emulation_of(scenario, combo), **combo)
        for repeat, (combo, options, launcher_options) in order
    ]


def emulation_of(scenario: Scenario, combo: Mapping[str, Any]) -> dict:
    """The run's emulated accelerator, resolved for its workload, batch and precision (empty if none)."""
    if scenario.emulation is None:
        return {}
    resolved = accelerators.resolve(scenario.emulation, combo["workload"], combo["batch_per_worker"],
                                    combo["precision"], combo["size"], combo["nodes"], combo["procs_per_node"],
                                    frameworks.get(combo["framework"]).emulated_exchange_cpu_cost)
    if scenario.faults is not None:  # placed for this run's hosts and ranks (harness.machines.faults)
        resolved["fault"] = faults.place(scenario.faults, combo["nodes"], combo["procs_per_node"])
    return resolved


def storage_as_data(storage, options) -> dict:
    """A run's storage options as a plain mapping (empty for synthetic data)."""
    import dataclasses

    return dataclasses.asdict(options[storage]) if storage in options else {}


def _launcher(combo: Mapping[str, Any]) -> str:
    """The run's launcher: as named, or the framework's default for "auto"."""
    if combo["launcher"] != launchers.AUTO:
        return combo["launcher"]
    return frameworks.get(combo["framework"]).launchers[0]
