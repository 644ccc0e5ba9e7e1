"""A scenario's runs before they run: ``rosetta plan`` (the runs it expands to, which would be skipped and
why) and ``rosetta run --dry-run`` (every run's folder written, none launched), as rich tables for the
commands to print."""

from __future__ import annotations

from pathlib import Path

from harness.contract.spec import RunSpec
from harness.experiment.matrix import expand
from harness.experiment.scenario import Scenario
from harness.running.runner import skip_reason

# Dimensions a plan leaves out: the scenario's name and what follows from the others.
PLAN_HIDDEN = ("scenario", "world_size", "global_batch", "warmup_steps", "measured_steps")


def plan_table(scenario: Scenario):
    """One row per run: the dimensions that vary (the constant ones in the title), whether it will run here."""
    from harness.base.escaping import terminal as escape
    from rich.table import Table

    specs = expand(scenario)
    dims = [spec.dimensions() for spec in specs]
    shown = [k for k in (dims[0] if dims else {}) if k not in PLAN_HIDDEN]
    varying = [k for k in shown if len({str(d[k]) for d in dims}) > 1]
    constant = ", ".join(f"{k} = {dims[0][k]}" for k in shown if k not in varying)
    table = Table(title=f"{escape(scenario.name)}: {len(specs)} runs ({scenario.settings.repeats} repeats, "
                        f"{scenario.settings.warmup_steps} warm-up + {scenario.settings.measured_steps} "
                        f"measured steps each)\n{constant}")
    for col in ("#", *varying, "repeat", "will run"):
        table.add_column(col)
    for i, (spec, dim) in enumerate(zip(specs, dims)):
        reason = skip_reason(spec)
        table.add_row(str(i), *(str(dim[k]) for k in varying), str(spec.repeat),
                      "yes" if reason is None else escape(f"skip: {reason}"))
    return table


def dry_run_table(scenario: Scenario, planned: list[tuple[RunSpec, Path, str | None]]):
    """What ``harness.running.runner.dry_run`` wrote: each run's folder, and whether it would run here."""
    from harness.base.escaping import terminal as escape
    from rich.table import Table

    table = Table(title=f"{escape(scenario.name)}: {len(planned)} runs written, none launched")
    for col in ("#", "framework", "workload", "world", "batch", "precision", "launcher", "folder", "here"):
        table.add_column(col)
    for i, (spec, run_dir, reason) in enumerate(planned):
        table.add_row(str(i), spec.framework, f"{spec.workload.value}/{spec.size.value}",
                      f"{spec.nodes}x{spec.procs_per_node}", str(spec.batch_per_worker), spec.precision.value,
                      spec.launcher, escape(str(run_dir)),
                      "would run" if reason is None else escape(f"would skip: {reason}"))
    return table
