"""``rosetta``: the parser built from each verb group's ``add_parsers``, and the one place that turns a
UserError into one line (exit 2), Ctrl-C or a batch system's stop into exit 130, and a crash of a verb
that gives a verdict (compare, history: ``gives_verdict``) into exit 2, since CI reads 1 as "regressed"."""

from __future__ import annotations

import argparse
import signal
import sys

from harness.base.environment import own_tools_first
from harness.base.errors import UserError
from harness.cli import dashboard, data, export, perf, results, sweep


def _stop_like_ctrl_c(signum, _frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a mistake (2, one line) or --help (0): the exit status, returned like a verb's
        return exc.code if isinstance(exc.code, int) else 2
    own_tools_first()  # the environment's own mpirun, torchrun, horovodrun, for us and every child
    # A batch system's stop (SIGTERM at a job's time limit, SIGHUP when a session ends) is handled
    # as Ctrl-C: the current run is recorded as interrupted and its processes are stopped. SIGINT too,
    # explicitly: Python leaves it ignored when its parent ignored it (a job put in the background by a
    # non-interactive shell, as CI scripts do), and `kill -INT` then did nothing.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop_like_ctrl_c)
    try:
        return args.handler(args) or 0
    except UserError as exc:
        from harness.results.redact import scrub

        print(f"rosetta: error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # only verbs that run something (set_defaults(runs_sweep=True)) have recorded a run as interrupted
        recorded = getattr(args, "runs_sweep", False) and not getattr(args, "dry_run", False)
        print("rosetta: interrupted" + ("; the current run was recorded as interrupted" if recorded else ""),
              file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001  a verdict's exit 1 must never come from a crash
        if not getattr(args, "gives_verdict", False):
            raise
        where = exc.__traceback__
        while where and where.tb_next:
            where = where.tb_next
        from harness.results.redact import scrub

        place = f" at {where.tb_frame.f_code.co_filename}:{where.tb_lineno}" if where else ""
        print(scrub(f"rosetta: error: {args.command} failed ({type(exc).__name__}: {exc}{place}); "
                    "this is no verdict"), file=sys.stderr)
        return 2


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose mistakes are one line (the usage is a --help away), exit 2 like every bad input."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="rosetta", description="Distributed training benchmarks across "
                                     "frameworks, strategies and storage.")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (sweep, results, dashboard, export, perf, data):
        group.add_parsers(sub)
    return parser


if __name__ == "__main__":
    sys.exit(main())
