"""Verbs that read results: ``rosetta report``, ``compare``, ``history``, ``reproduce``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.base.errors import UserError
from harness.cli.console import (
    DEFAULT_RESULTS,
    add_allow_failures,
    chart_file,
    print_dry_run,
    print_items,
    report_sweep,
    run_with_progress,
    sweep_exit_status,
    wide_console,
)


def add_parsers(sub) -> None:
    """The verbs of results: report, rebuild, compare, history, reproduce."""
    for add in (_add_report, _add_rebuild, _add_compare, _add_history, _add_reproduce):
        add(sub)


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="print the results table and write the chart")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.add_argument("--sweep", help="sweep id to report (default: the latest; 'all' for every sweep)")
    p.add_argument("--chart", type=Path, help="chart PNG path (default: RESULTS/report-<sweep>.png)")
    p.add_argument("--notebook", action="store_true",
                   help="also execute notebooks/report.ipynb (papermill) and write report.md, report.html and "
                        "the charts into RESULTS/report-<sweep>/")
    p.set_defaults(handler=cmd_report)


def _add_rebuild(sub) -> None:
    p = sub.add_parser("rebuild", help="make the results table (results.parquet, results.csv) again from every "
                                       "run's row.json; a damaged table is kept beside it")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.set_defaults(handler=cmd_rebuild)


def _add_compare(sub) -> None:
    p = sub.add_parser("compare", help="compare two sets of results per configuration; exit 1 on a "
                                       "significant regression (for CI gates)")
    p.add_argument("baseline", help="results folder or results .parquet file")
    p.add_argument("current", help="results folder or results .parquet file (may be the same as BASELINE)")
    p.add_argument("--baseline-sweep", help="sweep id or 'all' (default: the latest; with the same source "
                                            "on both sides, the one before the latest)")
    p.add_argument("--current-sweep", help="sweep id or 'all' (default: the latest)")
    p.add_argument("--baseline-sweeps", metavar="SWEEPS",
                   help="several sweeps pooled as the baseline: last:N, FIRST..LAST (time order), ID,ID or all; "
                        "with one source on both sides, counted before the current sweeps")
    p.add_argument("--current-sweeps", metavar="SWEEPS", help="several sweeps pooled as the current side (as above)")
    p.add_argument("--alpha", type=float, default=None, help="significance level of the U test (default 0.01)")
    p.add_argument("--floor", type=float, default=None, help="smallest noise threshold, as a fraction "
                                                            "(default 0.03)")
    p.add_argument("--strict-provenance", action="store_true",
                   help="refuse (exit 2) when hardware or software provenance differs, instead of flagging it")
    p.add_argument("--junit", type=Path, help="also write JUnit XML here: a test case per configuration, a "
                                              "regression or failed run as a failure (for CI gates)")
    p.add_argument("--markdown", type=Path, help="also write a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--json", type=Path, help="also write the verdicts as JSON here")
    p.set_defaults(handler=cmd_compare, gives_verdict=True)


def _add_history(sub) -> None:
    p = sub.add_parser("history", help="throughput of each configuration on each machine over time: levels, steps, "
                                       "outliers, trends; exit 1 when the newest sweep confirms a step down (for CI "
                                       "gates: once per change)")
    p.add_argument("sources", nargs="*", type=Path,
                   help="results folders or .parquet files, read together (default: the results folder)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.add_argument("--config", help="a config_id (or its first characters) to show alone")
    p.add_argument("--host", help="only the series measured on this host")
    p.add_argument("--last", type=int, help="analyse only the last N sweeps of each series")
    p.add_argument("--alpha", type=float, default=0.01, help="significance of the newest sweep's test (default "
                                                              "0.01); steps are confirmed at alpha / 10")
    p.add_argument("--floor", type=float, default=0.03, help="smallest change reported, a fraction of "
                                                              "throughput (default 0.03)")
    p.add_argument("--chart", type=Path, help="chart PNG path (default: history.png beside the first source)")
    p.add_argument("--no-chart", action="store_true", help="write no chart")
    p.add_argument("--junit", type=Path, help="also write JUnit XML here: a test case per series, a regression on "
                                              "its newest sweep as a failure")
    p.add_argument("--markdown", type=Path, help="also write a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--json", type=Path, help="also write every series (points, levels, steps, outliers, trends, "
                                             "verdict) as JSON here")
    p.add_argument("--accept", metavar="SWEEP", help="mark SWEEP as the new normal (with --reason; narrowed by "
                                                    "--config and --host): the gate starts a new level there, in "
                                                    "this run and every later one (the first source's gate-marks.json)")
    p.add_argument("--reason", help="why --accept's sweep is the new normal (required with --accept)")
    p.add_argument("--canary", action="store_true", help="also plant each series' minimum detectable step in a copy "
                                                        "and say whether its gate sees it")
    p.set_defaults(handler=cmd_history, gives_verdict=True)


def _add_reproduce(sub) -> None:
    p = sub.add_parser("reproduce", help="run a published reference's scenario at this machine's scale and "
                                         "plot measured vs published")
    p.add_argument("name", nargs="?", help="reference id (see --list)")
    p.add_argument("--list", action="store_true", help="list the references in results/reference/")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.add_argument("--sweep", help="use this earlier sweep instead of running (re-plot); several joined by commas "
                                     "(--at emulated runs a sweep per set of series with their own links)")
    p.add_argument("--size", help="workload size to run (default: the reference's)")
    p.add_argument("--repeats", type=int, help="repeats per configuration (default: the reference's)")
    p.add_argument("--measured-steps", type=int, help="measured steps per run (default: the reference's)")
    p.add_argument("--at", choices=["reduced", "published", "emulated"], default="reduced",
                   help="reduced: the reference's run at this machine's scale (default); published: its published "
                        "configuration (GPUs per node, nodes per point, batch, precision, data); emulated: that "
                        "configuration on the emulated GPU cluster (emulated GPUs, real gradients, its links "
                        "shaped and time-dilated between network-namespace hosts; needs root)")
    p.add_argument("--framework", help="with --at emulated: this framework instead of the published one (e.g. "
                                       "torch_ddp, whose gloo waits block where Open MPI's poll)")
    p.add_argument("--dilation", type=float, default=0.0,
                   help="with --at emulated: the time dilation k (default 0: picked per point from its exchange)")
    p.add_argument("--launcher", default="auto",
                   help="with --at reduced or published: torchrun, mpirun, slurm, kubernetes, azureml, spark, ... "
                        "(default: each framework's own)")
    p.add_argument("--dry-run", action="store_true", help="with --at published: write every point's job script or "
                                                          "manifest under RESULTS/dry-run/, launch nothing")
    p.add_argument("--gpus", type=int, help="workers (GPUs) reachable; a point needing more is a skipped row "
                                            "(default: this machine's GPUs, or its cores with --device cpu; no "
                                            "limit with slurm or kubernetes)")
    p.add_argument("--device", choices=["cuda", "cpu", "auto"], default="cuda",
                   help="with --at published: the device (default cuda; cpu for a scaled-down run)")
    p.add_argument("--batch", type=int, help="with --at published: batch per worker instead of the published one")
    p.add_argument("--precision", help="with --at published: precision instead of the published one")
    p.add_argument("--container", choices=["none", "pyxis", "apptainer"], default="none",
                   help="with --at published --launcher slurm: the ranks run in each framework's image (its CUDA "
                        "build, docker/) through pyxis or apptainer (default none: the repository's environment)")
    add_allow_failures(p)
    p.set_defaults(handler=cmd_reproduce, runs_sweep=True)

def cmd_report(args: argparse.Namespace) -> None:
    report_sweep(args.results, args.sweep, chart_file(args.chart))
    if getattr(args, "notebook", False):
        from harness.reports import notebook as notebook_report

        executed = notebook_report.execute(args.results, args.sweep)
        print(f"notebook: {executed}\nreport: {executed.parent / 'report.md'} and {executed.parent / 'report.html'}")


def cmd_rebuild(args: argparse.Namespace) -> None:
    from harness.results import table as results
    from harness.running.runner import scrub_unfinished

    scrubbed = scrub_unfinished(args.results)  # runs a killed harness left: their logs as the workers wrote them
    if scrubbed:
        print(f"rosetta: masked credentials in {len(scrubbed)} files of runs that never finished")
    from harness.results.rebuild import rebuild

    done = rebuild(args.results)
    for line in done.skipped:
        print(f"rosetta: warning: skipped a damaged row: {line}", file=sys.stderr)
    kept = f"; the old table is kept as {done.kept}" if done.kept else ""
    print(f"rosetta: rebuilt {args.results / results.PARQUET} (and {results.CSV}) from {done.rows} row.json "
          f"files{kept}")


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.gate import compare
    from harness.results import integrity

    for flag in ("junit", "markdown", "json"):  # before the table is printed: a bad path is input, not a verdict
        if getattr(args, flag) is not None:
            integrity.writable_file(getattr(args, flag), f"--{flag}")
    baseline, current = compare_sides(args)
    options = {k: v for k, v in (("alpha", args.alpha), ("floor", args.floor)) if v is not None}
    cells = compare.compare_tables(baseline, current, **options)
    differing = [c for c in cells if c.provenance]
    if args.strict_provenance and differing:
        raise UserError(f"provenance differs ({differing[0].provenance[0]}); not comparing "
                        f"(drop --strict-provenance to compare and flag it)")
    title = f"rosetta compare: {args.baseline} -> {args.current}"
    console = wide_console()
    from harness.gate import ci_reports, verdict_table

    verdict_table.print_comparison(cells, console, title=title)
    for path in ci_reports.write(cells, title, args.junit, args.markdown, args.json):
        console.print(f"written: {path}", highlight=False)
    return 1 if compare.gate_failed(cells) else 0


def compare_sides(args: argparse.Namespace):
    """The baseline's and the current rows: one sweep each (--*-sweep) or several (--*-sweeps)."""
    from harness.gate import compare

    for one, many in (("baseline_sweep", "baseline_sweeps"), ("current_sweep", "current_sweeps")):
        if getattr(args, one) is not None and getattr(args, many) is not None:
            raise UserError(f"--{one.replace('_', '-')} and --{many.replace('_', '-')}: give one of them")
    same = Path(args.baseline).resolve() == Path(args.current).resolve()
    if args.current_sweeps is not None:
        current = compare.load_sweeps(args.current, args.current_sweeps, where="--current-sweeps")
    else:
        current = compare.load_source(args.current, args.current_sweep)
    if args.baseline_sweeps is not None:
        exclude = tuple(sorted(set(current["sweep_id"]))) if same else ()
        baseline = compare.load_sweeps(args.baseline, args.baseline_sweeps, where="--baseline-sweeps",
                                       exclude=exclude)
        return baseline, current
    base_sweep = args.baseline_sweep
    if base_sweep is None and args.current_sweep is None and args.current_sweeps is None and same:
        base_sweep = compare.previous_sweep(args.baseline)
    return compare.load_source(args.baseline, base_sweep), current


def cmd_history(args: argparse.Namespace) -> int:
    """Exit 1 when some series' newest sweep is a suspected or confirmed regression, else 0."""
    from harness.gate import changepoints, ci_reports, history, history_chart, marks, verdict_table
    from harness.results import integrity

    chart_file(args.chart)  # and the reports' paths, before anything is printed
    for flag in ("junit", "markdown", "json"):
        if getattr(args, flag) is not None:
            integrity.writable_file(getattr(args, flag), f"--{flag}")
    settings = changepoints.Settings(alpha=args.alpha, floor=args.floor)
    if args.last is not None and args.last < 3:
        raise UserError(f"--last: at least 3 sweeps are needed to judge one, got {args.last}")
    sources = args.sources or [args.results]
    # --last: only the sweeps analysed are read (an --accept may name an older one)
    table = history.load(sources, args.last if args.accept is None else None)
    if args.accept is not None:
        accept_sweep(table, sources[0], args)
    all_series = history.series(table, config_id=args.config, host=args.host, last=args.last, settings=settings,
                                marks=marks.read(sources), canary=args.canary)
    console = wide_console()
    verdict_table.print_history(all_series, console, alpha=args.alpha)
    if not args.no_chart:
        chart = history_chart.plot(all_series, args.chart or history_chart.default_path(sources))
        console.print(f"chart: {chart}", highlight=False)
    title = f"rosetta history: {', '.join(map(str, sources))}"
    for path in ci_reports.write_history(all_series, title, args.junit, args.markdown, args.json):
        console.print(f"written: {path}", highlight=False)
    return 1 if history.gate_failed(all_series) else 0


def accept_sweep(table, source: Path, args: argparse.Namespace) -> None:
    """Write the --accept mark into the first source's marks file, once its sweep is known to be there."""
    from harness.gate import history, marks

    if not args.reason or not args.reason.strip():
        raise UserError("--accept: say why with --reason (the reason is shown wherever the gate reports it)")
    chosen = history.select(table, args.config, args.host)
    if args.accept not in set(chosen["sweep_id"].astype(str)):
        raise UserError(f"--accept: no sweep {args.accept!r} in the series selected (--config, --host)")
    path = marks.append(source, marks.Mark(sweep_id=args.accept, reason=args.reason.strip(),
                                           config=args.config or "", host=args.host or ""))
    print(f"rosetta: accepted {args.accept} as the new normal ({path})")


# reproduce's options that belong to some --at modes: flag -> (argparse dest, its default, the modes it serves)
MODE_OPTIONS = {
    "--size": ("size", None, ("reduced", "published")),
    "--framework": ("framework", None, ("emulated",)),
    "--dilation": ("dilation", 0.0, ("emulated",)),
    "--launcher": ("launcher", "auto", ("reduced", "published")),
    "--dry-run": ("dry_run", False, ("published", "emulated")),
    "--gpus": ("gpus", None, ("published", "emulated")),
    "--device": ("device", "cuda", ("published",)),
    "--batch": ("batch", None, ("published",)),
    "--precision": ("precision", None, ("published",)),
    "--container": ("container", "none", ("published",)),
}


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Exit 0, or 1 when a run it ran failed, timed out or diverged (unless --allow-failures)."""
    from harness.reproduction import reference

    for flag, value, least in (("--batch", args.batch, 1), ("--gpus", args.gpus, 0), ("--repeats", args.repeats, 1),
                               ("--measured-steps", args.measured_steps, 1)):
        if value is not None and value < least:  # never ignored, never "-5 reachable"
            raise UserError(f"{flag}: must be >= {least}, got {value}")
    misplaced = [flag for flag, (dest, default, modes) in MODE_OPTIONS.items()
                 if getattr(args, dest) != default and args.at not in modes]
    if misplaced and not args.sweep:
        modes = MODE_OPTIONS[misplaced[0]][2]
        raise UserError(f"{misplaced[0]}: only with --at {' or --at '.join(modes)} (this is --at {args.at})")
    if args.list or not args.name:
        from harness.reproduction.reference_list import references_table

        print_items([references_table()])
        return 0
    ref = reference.get(args.name)
    rows: list[dict] = []
    if args.sweep:
        sweep = args.sweep
    elif args.at == "emulated":
        rows = _run_emulated(ref, args)
        if rows is None:  # --dry-run
            return 0
        sweep = ",".join(dict.fromkeys(row["sweep_id"] for row in rows))  # a sweep per set of series
    elif args.at == "published":
        scenario, max_workers = _published_scenario(ref, args)
        if args.dry_run:
            print_dry_run(scenario, args.results, max_workers)
            return 0
        rows = run_with_progress(scenario, args.results, max_workers=max_workers)
        sweep = rows[0]["sweep_id"]
    else:
        from harness.reproduction import reproduce

        scenario = reproduce.scenario_for(ref, {"size": args.size, "repeats": args.repeats,
                                                "measured_steps": args.measured_steps,
                                                "launcher": None if args.launcher == "auto" else args.launcher})
        rows = run_with_progress(scenario, args.results)
        sweep = rows[0]["sweep_id"]
    from harness.reproduction.prediction import reproduction_report

    print_items(reproduction_report(ref, args.results, sweep))
    return sweep_exit_status(rows, args.allow_failures)


def _run_emulated(ref, args: argparse.Namespace) -> list[dict] | None:
    """The published configuration on the emulated cluster, its hosts started for the sweep and removed after."""
    import frameworks
    from harness.base.escaping import terminal as escape
    from harness.launchers import hosts
    from harness.machines.emulated_cluster import MAX_DILATION
    from harness.reproduction import emulated_reproduction as emulated
    from harness.reproduction import prerequisites

    if not 0 <= args.dilation <= MAX_DILATION:
        raise UserError(f"--dilation: must be 0 (auto) or 1 to {MAX_DILATION:g}, got {args.dilation:g}")
    if args.framework:  # before any network namespace is made for it
        frameworks.FRAMEWORKS.check(args.framework, "--framework")
    settings = {k: v for k, v in {"repeats": args.repeats, "measured_steps": args.measured_steps}.items()
                if v is not None}
    ready = prerequisites.check(ref)  # before the first point, not at the point that needs what is missing
    needed = emulated.hosts_needed(ref, args.framework)
    if args.dry_run and not ready.ok:  # the plan over the hosts it would make, and what this machine lacks
        for scenario in emulated.emulated_scenarios(ref, hosts.planned_hosts(needed), settings, args.dilation,
                                                    args.framework):
            print_dry_run(scenario, args.results, args.gpus or emulated.reachable(ref, scenario))
        print_items([escape(ready.line())])
        return None
    if not ready.ok:
        raise UserError(ready.line())
    print_items([escape(ready.line())])
    rows: list[dict] = []
    with hosts.namespace_hosts(needed) as names:
        # a scenario per set of series sharing an accelerator and links (batchai-tf-v100: Intel MPI, then TCP),
        # and per layout of their points (full size; reduced where the processes would not fit)
        for scenario in emulated.emulated_scenarios(ref, names, settings, args.dilation, args.framework):
            reachable = args.gpus or emulated.reachable(ref, scenario)
            if args.dry_run:
                print_dry_run(scenario, args.results, reachable)
            else:
                rows += run_with_progress(scenario, args.results, max_workers=reachable)
    return rows or None


def _published_scenario(ref, args: argparse.Namespace):
    """The published configuration as a scenario, and the workers reachable for it (None: no limit)."""
    import os

    from harness import launchers
    from harness.reproduction import published

    engine = launchers.module(args.launcher) if args.launcher in launchers.REGISTRY else None
    cluster = bool(getattr(engine, "CLUSTER", False))  # a scheduler's nodes: this machine's GPUs do not bound it
    gpus_per_node = ref.published.gpus_per_node if ref.published and args.device == "cuda" else 0
    takes_gpus = engine is not None and "gpus_per_node" in engine.Options.__dataclass_fields__
    options = {args.launcher: {"gpus_per_node": gpus_per_node}} if cluster and takes_gpus and gpus_per_node else {}
    if args.container != "none":
        if args.launcher != "slurm":
            raise UserError(f"--container {args.container}: only with --launcher slurm (kubernetes and podman "
                            f"always run the framework's image)")
        options.setdefault("slurm", {})["container_runtime"] = args.container
    scenario = published.published_scenario(
        ref, launcher=args.launcher, device=args.device, size=args.size, batch_per_worker=args.batch,
        precision=args.precision, launcher_options=options,
        settings={"repeats": args.repeats, "measured_steps": args.measured_steps})
    if args.gpus is not None:
        return scenario, args.gpus
    if cluster:
        return scenario, None
    return scenario, (local_gpus() if args.device == "cuda" else os.cpu_count() or 1)


def local_gpus() -> int:
    """GPUs this machine has (``nvidia-smi -L``), 0 without the NVIDIA driver."""
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(line.startswith("GPU ") for line in out.splitlines())
