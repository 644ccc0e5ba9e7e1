"""``rosetta export mlflow``: the results table's rows as runs of an MLflow tracking server, once each
(harness.export)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.console import DEFAULT_RESULTS

TARGETS = ("mlflow",)


def add_parsers(sub) -> None:
    p = sub.add_parser("export", help="log every result row as a run of an MLflow tracking server (a second "
                                      "export adds nothing)")
    p.add_argument("target", choices=TARGETS, help="where to: mlflow")
    p.add_argument("--tracking-uri", help="the MLflow server, e.g. http://127.0.0.1:5000 (default: "
                                          "MLFLOW_TRACKING_URI)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.add_argument("--sweep", default="all", help="sweep id, or 'all' (default: every sweep)")
    p.set_defaults(handler=cmd_export)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """``rosetta run --export mlflow [--tracking-uri URI]``: the sweep's rows exported once it ends."""
    p.add_argument("--export", choices=TARGETS, help="after the sweep, log its rows to MLflow (as `rosetta "
                                                     "export mlflow --sweep ID` does)")
    p.add_argument("--tracking-uri", help="with --export mlflow: the server (default: MLFLOW_TRACKING_URI)")


def check_run_options(args: argparse.Namespace) -> None:
    """Before a sweep spends its time: the tracking server named (the export itself comes after)."""
    if getattr(args, "export", None) == "mlflow":
        from harness.export import mlflow_export

        mlflow_export.tracking_uri(args.tracking_uri)


def export_sweep(args: argparse.Namespace, sweep: str) -> None:
    if getattr(args, "export", None) == "mlflow":
        _export(args.results, args.tracking_uri, sweep)


def cmd_export(args: argparse.Namespace) -> None:
    _export(args.results, args.tracking_uri, args.sweep)


def _export(results: Path, uri: str | None, sweep: str) -> None:
    from harness.export import mlflow_export

    target = mlflow_export.tracking_uri(uri)
    summary = mlflow_export.export(results, target, sweep)
    for line in mlflow_export.describe(summary, target):
        print(line)
