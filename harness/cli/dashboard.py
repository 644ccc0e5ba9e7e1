"""``rosetta dashboard``: a static site of every series' history from one or more result stores
(harness.gate.dashboard), like ``asv publish``."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.base.errors import UserError
from harness.cli.console import DEFAULT_RESULTS


def add_parsers(sub) -> None:
    p = sub.add_parser("dashboard", help="write a static site (HTML, SVG charts, no server or network needed) of "
                                         "every series' history: levels, steps, outliers, trends, regressions")
    p.add_argument("sources", nargs="*", type=Path,
                   help="results folders or .parquet files, read together (default: the results folder)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.add_argument("--out", type=Path, help="folder to write the site into (default: dashboard/ beside the first "
                                            "source)")
    p.add_argument("--config", help="a config_id (or its first characters) to show alone")
    p.add_argument("--host", help="only the series measured on this host")
    p.add_argument("--last", type=int, help="analyse only the last N sweeps of each series")
    p.add_argument("--alpha", type=float, default=0.01, help="as rosetta history (default 0.01)")
    p.add_argument("--floor", type=float, default=0.03, help="as rosetta history (default 0.03)")
    p.set_defaults(handler=cmd_dashboard)


def default_out(sources) -> Path:
    """dashboard/ beside the first source's results (its folder, or the folder of its .parquet file)."""
    first = Path(sources[0])
    return (first if first.is_dir() else first.parent) / "dashboard"


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Exit 0 when the site is written (whatever the verdicts: rosetta history is the gate), 2 on bad input."""
    from harness.gate import changepoints, dashboard, history

    settings = changepoints.Settings(alpha=args.alpha, floor=args.floor)
    if args.last is not None and args.last < 3:
        raise UserError(f"--last: at least 3 sweeps are needed to judge one, got {args.last}")
    sources = args.sources or [args.results]
    table = history.load(sources)
    all_series = history.series(table, config_id=args.config, host=args.host, last=args.last, settings=settings)
    out = args.out or default_out(sources)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out: {out} is a file, not a folder")
    index = dashboard.write(all_series, table, out, f"rosetta dashboard: {', '.join(map(str, sources))}")
    failing = sum(s.verdict.fails for s in all_series)
    print(f"dashboard: {index} ({len(all_series)} series, {failing} regressed on their newest sweep)")
    return 0
