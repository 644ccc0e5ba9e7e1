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
    p.add_argument("--stale-days", type=float, default=7.0, help="flag a series with no new sweep for this many days "
                                                                "as stale (default 7)")
    p.add_argument("--as-of", help="the time staleness is judged at, UTC ISO 8601 (default: now)")
    p.set_defaults(handler=cmd_dashboard)


def default_out(sources) -> Path:
    """dashboard/ beside the first source's results (its folder, or the folder of its .parquet file)."""
    first = Path(sources[0])
    return (first if first.is_dir() else first.parent) / "dashboard"


def as_of_time(text: str | None):
    """--as-of as an aware UTC datetime (now when not given); a one-line error when it is no time."""
    from datetime import datetime, timezone

    if text is None:
        return datetime.now(timezone.utc)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"--as-of: {text!r} is not an ISO 8601 time (e.g. 2026-11-30T12:00:00+00:00)") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Exit 0 when the site is written (whatever the verdicts: rosetta history is the gate), 2 on bad input."""
    from harness.gate import changepoints, dashboard, history, marks

    settings = changepoints.Settings(alpha=args.alpha, floor=args.floor)
    if args.last is not None and args.last < 3:
        raise UserError(f"--last: at least 3 sweeps are needed to judge one, got {args.last}")
    as_of = as_of_time(args.as_of)
    if not (args.stale_days > 0 and args.stale_days < float("inf")):
        raise UserError(f"--stale-days: a number of days above 0, got {args.stale_days:g}")
    sources = args.sources or [args.results]
    out = args.out or default_out(sources)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out: {out} is a file, not a folder")
    table = history.load(sources, args.last)  # --last: only the sweeps analysed are read
    all_series = history.series(table, config_id=args.config, host=args.host, last=args.last, settings=settings,
                                marks=marks.read(sources), canary=True)
    index = dashboard.write(all_series, table, out, f"rosetta dashboard: {', '.join(map(str, sources))}",
                            freshness=dashboard.Freshness(as_of, args.stale_days))
    failing = sum(s.verdict.fails for s in all_series)
    print(f"dashboard: {index} ({len(all_series)} series, {failing} regressed on their newest sweep)")
    return 0
