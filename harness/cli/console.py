"""What the verbs share: the default results folder, a console as wide as the terminal (or 180 columns
in logs) that prints what the reports return, a sweep run under a live progress display, a sweep's
report, and the exit status a sweep ends with. The other verb modules import this one and no other."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

DEFAULT_RESULTS = Path("results")
CHART_SUFFIXES = (".png", ".svg", ".pdf")  # what matplotlib writes that a person opens


def chart_file(path: Path | None, what: str = "--chart") -> Path | None:
    """A chart path given on the command line, checked before anything runs or prints: a PNG, SVG or PDF
    name in a folder that can be written (None: the verb's default inside the results folder)."""
    from harness.base.errors import UserError
    from harness.results import integrity

    if path is None:
        return None
    if path.suffix.lower() not in CHART_SUFFIXES:
        raise UserError(f"{what}: {path}: charts are written as {', '.join(CHART_SUFFIXES)}; name it so")
    return integrity.writable_file(path, what)


def wide_console():
    """A terminal's own width; 180 columns in logs and pipes (CI), where wrapping hides the table."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=180)


def print_items(items, console=None) -> None:
    """Print rich renderables (tables, text, strings with markup) one after another."""
    console = console or wide_console()
    for item in items:
        console.print(item)


def report_sweep(results_dir: Path, sweep: str | None, chart: Path | None) -> None:
    """Print a sweep's report (harness.reports.sweep_report), then the scaling model's check against it
    where ``rosetta comm`` has measured this machine (harness.scaling.check)."""
    from harness.reports.sweep_report import sweep_report
    from harness.scaling import check as scaling_check

    table, items = sweep_report(results_dir, sweep, chart)
    console = wide_console()
    print_items(items, console)
    print_items(scaling_check.report(results_dir, table=table) or (), console)


class RichObserver:
    """Live progress: which run, which step, current samples/s."""

    def __init__(self, progress):
        self.progress = progress
        self.task = progress.add_task("starting", total=None)

    def run_started(self, index: int, total: int, spec) -> None:
        self.progress.update(self.task, total=total)
        self.label = (f"run {index + 1}/{total} {spec.framework} {spec.workload.value}/{spec.size.value} "
                      f"{spec.nodes}x{spec.procs_per_node} b{spec.batch_per_worker} r{spec.repeat}")
        self.progress.update(self.task, description=f"{self.label}: launching")

    def step(self, spec, event: dict[str, Any]) -> None:
        total = spec.warmup_steps if event["phase"] == "warmup" else spec.measured_steps
        rate = event["samples"] * spec.world_size / event["seconds"] if event["seconds"] > 0 else 0.0
        self.progress.update(self.task, description=f"{self.label}: {event['phase']} step {event['index'] + 1}/"
                                                    f"{total}, ~{rate:.1f} samples/s")

    def run_finished(self, row: dict[str, Any]) -> None:
        from harness.base.escaping import terminal as escape

        self.progress.advance(self.task)
        if row["status"] == "ok":
            note = f"[green]ok[/green] {row['throughput']:.1f} {row['sample_unit']}/s"
        else:
            note = f"[yellow]{row['status']}[/yellow]: {escape(row['reason'] or '')}"  # reasons hold brackets
        # soft_wrap: a captured log keeps the whole reason on its line, never cut or wrapped mid-sentence
        self.progress.console.print(f"{self.label}: {note}", highlight=False, soft_wrap=True)


def run_with_progress(scenario, results_dir: Path, resume: bool = False,
                      max_workers: int | None = None) -> list[dict[str, Any]]:
    """Run every run of ``scenario`` into ``results_dir`` with live progress; returns the new rows."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.running.runner import run_sweep

    # transient: the bar goes when the sweep ends (else a log gets a stale copy of it after the last run)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), transient=True) as progress:
        return run_sweep(scenario, results_dir, RichObserver(progress), resume=resume, max_workers=max_workers)


# Statuses that make `rosetta run` and `rosetta reproduce` exit 1 (CI must be able to fail on them):
# skipped runs are not failures (this machine cannot run them), interrupted ones exit 130 anyway.
FAILING = ("failed", "timeout", "diverged")
EXIT_RUN_FAILED = 1


def add_allow_failures(parser) -> None:
    parser.add_argument("--allow-failures", action="store_true",
                        help=f"exit 0 even when a run {', '.join(FAILING)} (default: exit {EXIT_RUN_FAILED})")


def sweep_exit_status(rows: list[dict[str, Any]], allow_failures: bool) -> int:
    """0, or EXIT_RUN_FAILED (saying so on stderr) when a run failed, timed out or diverged."""
    failing = [r for r in rows if r["status"] in FAILING]
    if not failing:
        return 0
    counts = ", ".join(f"{sum(r['status'] == s for r in failing)} {s}" for s in FAILING
                       if any(r["status"] == s for r in failing))
    accepted = allow_failures and "accepted (--allow-failures)"
    print(f"rosetta: {len(failing)} of {len(rows)} runs did not succeed ({counts}); "
          f"{accepted or f'exit {EXIT_RUN_FAILED} (--allow-failures to accept)'}", file=sys.stderr)
    return 0 if allow_failures else EXIT_RUN_FAILED


def print_dry_run(scenario, results_dir: Path, max_workers: int | None = None) -> None:
    """Write every run's files without launching, and say which would run and which would skip."""
    from harness.reports.plan import dry_run_table
    from harness.running.runner import dry_run

    print_items([dry_run_table(scenario, dry_run(scenario, results_dir, max_workers))])
