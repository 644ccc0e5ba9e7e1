"""Which sweeps of a table a verb reads: one id, several, a range in time order, the last N, or all.

A selection (``--baseline-sweeps``, ``--current-sweeps``) is ``all``, ``last:N`` (the N newest sweeps),
``FIRST..LAST`` (every sweep from FIRST to LAST in time order, both included; either end may be left
out) or ids separated by commas. Sweeps are ordered by their last run's timestamp.
"""

from __future__ import annotations

import pandas as pd

from harness.base.errors import UserError


def order(table: pd.DataFrame) -> list[str]:
    """The table's sweep ids, oldest first (by each sweep's last run)."""
    return [str(s) for s in table.groupby("sweep_id")["timestamp"].max().sort_values().index]


def select(table: pd.DataFrame, spec: str, *, where: str, exclude: tuple[str, ...] = ()) -> pd.DataFrame:
    """The rows of the sweeps ``spec`` names; ``exclude``: sweeps left out before counting ``last:N``
    (the other side's, when one source is on both sides)."""
    ids = [s for s in order(table) if s not in exclude]
    chosen = _chosen(ids, spec.strip(), where)
    if not chosen:
        raise UserError(f"{where}: {spec!r} selects no sweep; sweeps: {', '.join(ids) or '(none)'}")
    return table[table["sweep_id"].isin(chosen)]


def _chosen(ids: list[str], spec: str, where: str) -> list[str]:
    if spec == "all":
        return ids
    if spec.startswith("last:"):
        count = spec.removeprefix("last:")
        if not count.isdigit() or int(count) < 1:
            raise UserError(f"{where}: last:N needs a whole number N >= 1, got {spec!r}")
        return ids[-int(count):]
    if ".." in spec:
        first, _, last = spec.partition("..")
        for end in (first, last):
            if end and end not in ids:
                raise UserError(f"{where}: no sweep {end!r}; sweeps: {', '.join(ids)}")
        start = ids.index(first) if first else 0
        stop = ids.index(last) + 1 if last else len(ids)
        if start >= stop:
            raise UserError(f"{where}: {spec!r}: {first} comes after {last}")
        return ids[start:stop]
    named = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in named if s not in ids]
    if unknown:
        raise UserError(f"{where}: no sweep {unknown[0]!r}; sweeps: {', '.join(ids)}")
    return named
