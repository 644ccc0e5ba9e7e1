"""``rosetta rebuild``: the results table made again from the ``row.json`` copy every run keeps (for a table
that was lost or damaged). A damaged copy (not JSON, not an object, a column the schema lacks, a value of
the wrong type) is skipped with a warning naming it; a table in the way is kept beside the new one under a
name no earlier kept copy has."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.base.errors import UserError
from harness.results import integrity
from harness.results.table import CSV, PARQUET, RESULTS, ROW_JSON_GLOB, atomic_write, frame_of, locked, write_parquet


@dataclass(frozen=True)
class Rebuilt:
    rows: int
    kept: Path | None  # where the old table was moved (None: there was none)
    skipped: list[str] = field(default_factory=list)  # "<row.json>: why", one per damaged copy


def _read(path: Path) -> tuple[dict | None, str | None]:
    """A row.json's row, or why it cannot be one (as JSON: its columns and types are checked after)."""
    try:
        row = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"not readable JSON ({(str(exc).splitlines() or [type(exc).__name__])[0][:80]})"
    if not isinstance(row, dict):
        return None, f"not a JSON object (a {type(row).__name__})"
    return row, None


def _schema_problem(path: Path, row: dict) -> str | None:
    try:
        integrity.conformed(pd.DataFrame([row]), RESULTS.columns, RESULTS.label, str(path))
    except UserError as exc:
        return str(exc).removeprefix(f"{path}: ")
    return None


def kept_name(results_dir: Path) -> Path:
    """``results.parquet.broken-<n>``, n one past every kept copy's: never a name in use (with the lock held)."""
    numbers = [int(p.name.rsplit("-", 1)[1]) for p in results_dir.glob(f"{PARQUET}.broken-*")
               if p.name.rsplit("-", 1)[1].isdigit()]
    n = max(numbers, default=-1) + 1
    while (results_dir / f"{PARQUET}.broken-{n}").exists():
        n += 1
    return results_dir / f"{PARQUET}.broken-{n}"


def rebuild(results_dir: Path) -> Rebuilt:
    """Write the table from every run's row.json, skipping damaged ones; the table in the way is kept."""
    results_dir = Path(results_dir)
    paths = sorted(results_dir.glob(ROW_JSON_GLOB))
    if not paths:
        raise UserError(f"{results_dir}: no {ROW_JSON_GLOB} to rebuild the table from")
    read, skipped = [], []
    for path in paths:
        row, reason = _read(path)
        if row is None:
            skipped.append(f"{path}: {reason}")
        else:
            read.append((path, row))
    try:  # all at once; only where that fails, row by row (to name the damaged ones)
        integrity.conformed(pd.DataFrame([row for _, row in read]), RESULTS.columns, RESULTS.label, "row.json")
        rows = [row for _, row in read]
    except UserError:
        problems = [(path, row, _schema_problem(path, row)) for path, row in read]
        rows = [row for _, row, problem in problems if problem is None]
        skipped += [f"{path}: {problem}" for path, _, problem in problems if problem is not None]
    frame = frame_of(RESULTS, rows).sort_values("timestamp", kind="stable", ignore_index=True)
    integrity.writable_folder(results_dir)
    with locked(results_dir):
        kept = None
        if (results_dir / PARQUET).exists() or (results_dir / PARQUET).is_symlink():
            kept = kept_name(results_dir)
            os.replace(results_dir / PARQUET, kept)
        atomic_write(results_dir / PARQUET, lambda p: write_parquet(frame, p))
        atomic_write(results_dir / CSV, lambda p: frame.to_csv(p, index=False))
    return Rebuilt(len(frame), kept, skipped)
