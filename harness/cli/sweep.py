"""Verbs that plan and run: ``rosetta list``, ``plan``, ``run`` (and its dry run), ``equivalence``."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from harness.base.errors import UserError
from harness.cli.console import (
    DEFAULT_RESULTS,
    add_allow_failures,
    print_dry_run,
    report_sweep,
    run_with_progress,
    sweep_exit_status,
    wide_console,
)
from harness.cli.export import add_run_options, check_run_options, export_sweep


def add_parsers(sub) -> None:
    p = sub.add_parser("list", help="frameworks, workloads, strategies, storage and launchers known here")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("plan", help="print the runs a scenario expands to, without running them")
    p.add_argument("scenario", nargs="?", help="scenario TOML file (default: the built-in quickstart)")
    p.set_defaults(handler=cmd_plan)

    p = sub.add_parser("run", help="run a scenario (default: the built-in quickstart) and report it")
    p.add_argument("scenario", nargs="?", help="scenario TOML file (default: the built-in quickstart)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.add_argument("--resume", action="store_true",
                   help="go on with this scenario's latest sweep: run only what has not completed")
    p.add_argument("--dry-run", action="store_true",
                   help="write every run's files (spec, batch script, manifests, command) without launching")
    add_allow_failures(p)
    add_run_options(p)
    p.set_defaults(handler=cmd_run, runs_sweep=True)

    p = sub.add_parser("equivalence", help="check that every installed framework trains the same model the same "
                                           "way (parameters, FLOPs, optimizer, loss); exit 1 on a drift")
    p.add_argument("--size", default="full", choices=["tiny", "small", "full", "large"], help="workload size (default full: the published parameter counts)")
    p.add_argument("--steps", type=int, default=0, help="training steps on the fixed batch (default 0 at full "
                                                       "size; the tests use 4 at tiny)")
    p.add_argument("--framework", action="append", help="only this framework (repeatable; default: all)")
    p.set_defaults(handler=cmd_equivalence)


def _load_scenario(path: str | None):
    from harness.experiment import scenario

    return scenario.load(path or scenario.builtin_quickstart())


def cmd_equivalence(args: argparse.Namespace) -> int:
    import frameworks
    from harness.contract.axes import Size, Workload
    from harness.contract.equivalence import REFERENCE_FRAMEWORK
    from harness.running.probe import PUBLISHED_PARAMETERS, verify

    size = Size(args.size)
    chosen = args.framework or frameworks.names()
    unknown = [name for name in chosen if name not in frameworks.REGISTRY]
    if unknown:
        raise UserError(f"--framework: unknown {', '.join(unknown)} (known: {', '.join(frameworks.names())})")
    console, drifted = wide_console(), False
    from rich.table import Table

    table = Table(title=f"equivalence with {REFERENCE_FRAMEWORK} ({size.value} size, {args.steps} training steps)")
    for name in ("framework", "workload", "parameters", "GFLOPs/sample", "optimizer", "loss", "verdict"):
        table.add_column(name)
    references: dict[Workload, dict] = {}
    for name in chosen:
        info = frameworks.get(name)
        workloads = []
        for workload in (w for w in info.workloads if w in PUBLISHED_PARAMETERS):
            missing = info.missing_modules(workload)
            if missing:
                table.add_row(name, workload.value, "", "", "", "", f"not installed ({', '.join(missing)})")
            else:
                workloads.append(workload)
        if not workloads:
            continue
        try:
            verdicts = verify(name, workloads, size, args.steps, references)
        except RuntimeError as exc:
            table.add_row(name, ", ".join(w.value for w in workloads), "", "", "", "",
                          f"[red]probe failed[/red]: {exc}")
            drifted = True
            continue
        for workload, (report, problems) in zip(workloads, verdicts):
            if name == REFERENCE_FRAMEWORK:
                references[workload] = report
            drifted |= bool(problems)
            losses = report["losses"]
            table.add_row(name, workload.value, f"{report['parameters']:,}", f"{report['flops_per_sample'] / 1e9:.3f}",
                          f"{report['optimizer']['name']} lr {report['optimizer']['lr']:g}",
                          f"{losses[0]:.3f} -> {losses[-1]:.3f}" if losses else "-",
                          "[green]same[/green]" if not problems else "[red]DRIFT[/red]: " + "; ".join(problems))
    console.print(table)
    return 1 if drifted else 0


def strategy_cell(info, strategy) -> str:
    """A strategy as ``rosetta list`` shows it: its name, and the devices it runs on where it is bound to some."""
    devices = info.strategy_devices.get(strategy)
    return strategy.value + (f" ({'/'.join(d.value for d in devices)} only)" if devices else "")


def cmd_list(args: argparse.Namespace) -> None:
    from rich.table import Table

    import frameworks
    from harness.contract.axes import Device, Storage, Strategy
    from harness.contract.workloads import WORKLOADS

    console = wide_console()
    table = Table(title="Frameworks")
    for col in ("name", "title", "launchers", "workloads", "strategies", "storage", "devices", "precision",
                "memory format", "compile", "installed"):
        table.add_column(col)
    for name in frameworks.names():
        info = frameworks.get(name)
        missing = info.missing_modules()
        extra = sorted({m for w in info.workloads for m in info.missing_modules(w)} - set(missing))
        installed = "[green]yes[/green]" if not missing else f"[red]no[/red] (missing {', '.join(missing)})"
        if not missing and extra:
            installed += f" (for some workloads, missing {', '.join(extra)})"
        table.add_row(name, info.title, ", ".join(info.launchers), ", ".join(w.value for w in info.workloads),
                      ", ".join(strategy_cell(info, s) for s in info.strategies),
                      ", ".join(s.value for s in info.storage),
                      ", ".join(d.value for d in info.devices), ", ".join(p.value for p in info.precisions),
                      _memory_formats(info), ", ".join(c.value for c in info.compiles), installed)
    console.print(table)
    workloads = Table(title="Workloads (sizes are option sets)")
    for col in ("name", "model", "unit", "sizes"):
        workloads.add_column(col)
    for info in WORKLOADS.values():
        sizes = "; ".join(f"{s.value}: " + ", ".join(f"{k}={v}" for k, v in opts.items())
                          for s, opts in info.presets.items())
        workloads.add_row(info.name.value, info.title, info.sample_unit, sizes)
    console.print(workloads)
    from harness.experiment.strategies import ONE_HOST, OPTIONS

    def with_options(strategy: Strategy) -> str:
        defaults = dataclasses.asdict(OPTIONS[strategy]())
        shown = [f"{k}={getattr(v, 'value', v)}" for k, v in defaults.items()]  # str-Enums by their value
        shown += [f"{name}: {'/'.join(w.value for w in frameworks.get(name).strategy_workloads[strategy])} only"
                  for name in frameworks.names() if strategy in frameworks.get(name).strategy_workloads]
        return strategy.value + (f" ({', '.join(shown)})" if shown else "")

    console.print(f"Strategies (default options): {'; '.join(with_options(s) for s in Strategy)}")
    console.print(f"One host only (a model in shared memory): {', '.join(s.value for s in ONE_HOST)}")
    console.print(f"Storage backends: {', '.join(s.value for s in Storage)}")
    console.print(f"Devices: {', '.join(d.value for d in Device)}")
    from harness import launchers

    console.print(f"Launchers: {', '.join(launchers.names())} ({launchers.AUTO}: the framework's first)")
    from harness.base import network

    console.print(f"Networks (link cap between hosts): {network.UNLIMITED} or a rate such as 1gbit, 100mbit")
    from harness.experiment.scenario import Matrix

    bounds = [f"{f.name} {f.metadata['min']}..{f.metadata['max']:,}" for f in dataclasses.fields(Matrix)
              if "max" in f.metadata]
    console.print(f"Numeric axes (integers): {', '.join(bounds)}; sizes: see Workloads")


def _memory_formats(info) -> str:
    """The memory formats a framework runs in: contiguous, and others with the workloads that have them."""
    from harness.contract.axes import MemoryFormat

    others: dict[str, list[str]] = {}
    for workload in info.workloads:
        for fmt in info.memory_formats.get(workload, ()):
            if fmt != MemoryFormat.CONTIGUOUS:
                others.setdefault(fmt.value, []).append(workload.value)
    return "; ".join([MemoryFormat.CONTIGUOUS.value] + [f"{f} ({', '.join(w)})" for f, w in others.items()])


# Dimensions a plan leaves out: the scenario's name and what follows from the others.
PLAN_HIDDEN = ("scenario", "world_size", "global_batch", "warmup_steps", "measured_steps")


def cmd_plan(args: argparse.Namespace) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from harness.experiment.matrix import expand
    from harness.running.runner import skip_reason

    scenario = _load_scenario(args.scenario)
    specs = expand(scenario)
    dims = [spec.dimensions() for spec in specs]
    shown = [k for k in (dims[0] if dims else {}) if k not in PLAN_HIDDEN]
    varying = [k for k in shown if len({str(d[k]) for d in dims}) > 1]
    constant = ", ".join(f"{k} = {dims[0][k]}" for k in shown if k not in varying)
    table = Table(title=f"{scenario.name}: {len(specs)} runs ({scenario.settings.repeats} repeats, "
                        f"{scenario.settings.warmup_steps} warm-up + {scenario.settings.measured_steps} "
                        f"measured steps each)\n{constant}")
    for col in ("#", *varying, "repeat", "will run"):
        table.add_column(col)
    for i, (spec, dim) in enumerate(zip(specs, dims)):
        reason = skip_reason(spec)
        table.add_row(str(i), *(str(dim[k]) for k in varying), str(spec.repeat),
                      "yes" if reason is None else escape(f"skip: {reason}"))
    Console().print(table)


def cmd_run(args: argparse.Namespace) -> int:
    """Exit 0, or 1 when a run failed, timed out or diverged (unless --allow-failures)."""
    scenario = _load_scenario(args.scenario)
    if args.dry_run:
        print_dry_run(scenario, args.results)
        return 0
    check_run_options(args)
    rows = run_with_progress(scenario, args.results, resume=args.resume)
    if not rows:
        print(f"rosetta: nothing to run: every run of {scenario.name!r} has completed")
        return 0
    report_sweep(args.results, rows[0]["sweep_id"], None)
    export_sweep(args, rows[0]["sweep_id"])
    return sweep_exit_status(rows, args.allow_failures)
