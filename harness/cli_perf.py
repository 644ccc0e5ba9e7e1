"""Subcommands about the measurement itself: ``rosetta comm`` and ``rosetta project``.

Kept out of harness/cli.py so that it stays small; cli.py adds these parsers with one call.
"""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_RESULTS = Path("results")


def _csv(kind):
    return lambda text: [kind(x) for x in text.split(",") if x.strip()]


def _bytes(text: str) -> int:
    """``4``, ``64K``, ``16M``, ``1G`` (powers of 1024) as bytes."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    try:
        return int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4, 64K, 16M, 1G)") from None


def add_parsers(sub) -> None:
    p = sub.add_parser("comm", help="collective microbenchmark: allreduce, broadcast, allgather bandwidth vs size")
    p.add_argument("file", nargs="?", type=Path, help="TOML file with a [comm] table (e.g. scenarios/comm.toml)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.add_argument("--backends", type=_csv(str), help="comma-separated: gloo,nccl,mpi,horovod")
    p.add_argument("--collectives", type=_csv(str), help="comma-separated: allreduce,broadcast,allgather")
    p.add_argument("--world-sizes", type=_csv(int), help="comma-separated ranks per launch (default 2)")
    p.add_argument("--min-bytes", type=_bytes, help="smallest message (default 4)")
    p.add_argument("--max-bytes", type=_bytes, help="largest message on GPUs (default 256M)")
    p.add_argument("--max-bytes-cpu", type=_bytes, help="largest message on CPUs (default 64M)")
    p.add_argument("--step-factor", type=int, help="each size is the previous x this (default 2)")
    p.add_argument("--warmup-iters", type=int)
    p.add_argument("--iters", type=int)
    p.add_argument("--chart", type=Path, help="chart PNG (default: RESULTS/comm-<sweep>.png)")
    p.add_argument("--report", action="store_true", help="only report the latest comm sweep, measure nothing")
    p.set_defaults(handler=cmd_comm)


def cmd_comm(args: argparse.Namespace) -> None:
    from rich.console import Console

    from harness import comm_report, comm_results
    from harness.comm_runner import run_comm
    from harness.comm_spec import load_settings
    from harness.errors import UserError

    console = Console()
    if not args.report:
        settings = load_settings(args.file, backends=args.backends, collectives=args.collectives,
                                 world_sizes=args.world_sizes, min_bytes=args.min_bytes, max_bytes=args.max_bytes,
                                 max_bytes_cpu=args.max_bytes_cpu, step_factor=args.step_factor,
                                 warmup_iters=args.warmup_iters, iters=args.iters)

        def announce(backend, world, reason):
            note = f"[yellow]skipped[/yellow]: {reason}" if reason else "measuring"
            console.print(f"comm {backend.value} x{world}: {note}", highlight=False)

        run_comm(settings, args.results, announce)
    table = comm_report.latest_sweep(comm_results.load(args.results))
    if table.empty:
        raise UserError(f"{args.results}: no comm results yet; run `rosetta comm` first")
    comm_report.print_tables(table, console)
    sweep = table["sweep_id"].iloc[0]
    chart = comm_report.plot(table, args.chart or args.results / f"comm-{sweep}.png")
    console.print(f"chart: {chart}")
    console.print(f"table: {args.results / comm_results.PARQUET} (and {comm_results.CSV})")
