"""Where compare, history and the dashboard get their rows: a results folder or a results Parquet file, one
sweep, a selection of sweeps or all of them, in the columns the verb reads. The sweeps are chosen from the
sweep_id and timestamp columns alone, then only their rows are read (harness.results.table.read_file pushes
the columns and the sweeps down to the Parquet reader: a store of 10^6 rows holds one sweep's few hundred)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from harness.base.errors import UserError
from harness.results import table as results


def load_source(source: str | Path, sweep: str | None = None, columns: Sequence[str] | None = None,
                sweeps: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows of a results folder or a results Parquet file; ``sweep``: an id, ``all``, or None for the latest
    sweep in the source; ``columns``: only these (and the required ones; None: all); ``sweeps``: with ``all``,
    only these sweeps' rows (None: every sweep's). The sweep is chosen from
    the sweep_id and timestamp columns, then only its rows are read (a store of 10^6 rows holds one sweep's
    few hundred)."""
    path, order = _order(source)
    if sweep == "all":
        return _read(path, columns, sweeps)
    if sweep is None:
        sweep = str(order.sort_values("timestamp")["sweep_id"].iloc[-1])
    if sweep not in set(order["sweep_id"]):
        raise UserError(f"{source}: no sweep {sweep!r}; sweeps: {', '.join(sorted(set(order['sweep_id'])))}")
    return _read(path, columns, [sweep])


def load_sweeps(source: str | Path, spec: str, *, where: str, exclude: tuple[str, ...] = ()) -> pd.DataFrame:
    """The rows of the sweeps a selection names (harness.results.sweeps: ``all``, ``last:N``, a range, ids),
    chosen from the sweep order, then read."""
    from harness.results import sweeps

    path, order = _order(source)
    chosen = sorted(set(sweeps.select(order, spec, where=where, exclude=exclude)["sweep_id"]))
    return _read(path, None, chosen)


def _order(source: str | Path, also: Sequence[str] = ()) -> tuple[Path, pd.DataFrame]:
    """The source's table path and its sweep_id and timestamp columns (results.sweep_order); no rows is bad
    input."""
    path = Path(source)
    if not (path.is_dir() or (path.is_file() and path.suffix == ".parquet")):
        raise UserError(f"{source}: not a results folder or a .parquet file")
    order = results.sweep_order(results.RESULTS, path, also)
    if order.empty:
        raise UserError(results.nothing_yet(path) if path.is_dir() else f"{source}: no results in it")
    return path, order


def _read(path: Path, columns: Sequence[str] | None, sweeps: Sequence[str] | None = None) -> pd.DataFrame:
    if path.is_dir():
        return results.load(path, columns, sweeps)
    return results.read_file(results.RESULTS, path, columns, sweeps)  # an older schema's columns migrated on read


def previous_sweep(source: str | Path) -> str:
    """The sweep before the latest in a results folder or file (to compare a store with itself)."""
    order = _order(source)[1].sort_values("timestamp").drop_duplicates("sweep_id", keep="last")["sweep_id"].tolist()
    if len(order) < 2:
        raise UserError(f"{source}: only one sweep ({order[0]}); name two sources or two sweeps to compare")
    return str(order[-2])


def key_columns(source: str | Path, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` alone of every row of a source (see results.sweep_order), to choose the sweeps to read."""
    return _order(source, columns)[1][list(columns)]
