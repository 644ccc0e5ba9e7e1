"""Verbs that plan and run: ``rosetta list``, ``plan``, ``run`` (and its dry run), ``equivalence``: their
arguments parsed, the work and the tables done by harness.reports (catalog, plan, sweep_report,
equivalence_report) and harness.running."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.console import (
    DEFAULT_RESULTS,
    add_allow_failures,
    print_dry_run,
    print_items,
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
    p.add_argument("--steps", type=training_steps, default=0,
                   help=f"training steps on the fixed batch: 0 (the default: the loss is not checked) or 2 to "
                        f"{MAX_STEPS:,} (the loss must fall over them; the tests use 4 at tiny)")
    p.add_argument("--framework", action="append", help="only this framework (repeatable; default: all)")
    p.set_defaults(handler=cmd_equivalence)


MAX_STEPS = 10_000  # a probe's steps on one batch; more is a typo, not a check (full size: minutes a step)


def training_steps(text: str) -> int:
    """``--steps``: 0 (no loss checked) or 2 to MAX_STEPS: one loss cannot fall, and a negative count would
    run on with nothing checked."""
    try:
        steps = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if steps == 1 or not 0 <= steps <= MAX_STEPS:
        raise argparse.ArgumentTypeError(f"{steps}: 0 (no loss checked) or 2 to {MAX_STEPS:,} (a loss must fall "
                                         f"over at least two steps)")
    return steps


def _load_scenario(path: str | None):
    from harness.experiment import scenario

    return scenario.load(path or scenario.builtin_quickstart())


def cmd_equivalence(args: argparse.Namespace) -> int:
    import frameworks
    from harness.contract.axes import Size
    from harness.reports.equivalence_report import capped_notes, equivalence_report

    chosen = args.framework or frameworks.names()
    for name in chosen:
        frameworks.FRAMEWORKS.check(name, "--framework")
    table, drifted = equivalence_report(chosen, Size(args.size), args.steps)
    print_items([table, *capped_notes(chosen, Size(args.size))])
    return 1 if drifted else 0


def cmd_list(args: argparse.Namespace) -> None:
    from harness.reports.catalog import catalog_items

    print_items(catalog_items())


def cmd_plan(args: argparse.Namespace) -> None:
    from rich.console import Console

    from harness.base.escaping import terminal as escape
    from harness.reports.plan import plan_table
    from harness.reproduction import prerequisites

    scenario = _load_scenario(args.scenario)
    items = [plan_table(scenario)]
    emulation = scenario.emulation
    if emulation is not None and (emulation.intra_link or emulation.inter_link):  # an emulated cluster's shaped links
        items.append(escape(prerequisites.check(None).line("the emulated cluster")))  # root, ip, tc, iptables
    print_items(items, Console())


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
