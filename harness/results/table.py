"""The results table: one tidy row per run, a schema version on every row.

Every row is also kept as ``row.json`` in its run's folder. The table
(``results.parquet`` and ``results.csv`` in the results folder) is rewritten
atomically (a temporary file, then rename) after each run, so a crash at any
moment leaves the previous complete table in place.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.base.errors import UserError
from harness.contract.axes import Status, values
from harness.results import integrity
from harness.results.row import COLUMNS, READABLE_VERSIONS, SCHEMA_VERSION

# The columns (name -> pandas dtype, in file order), the schema version and the versions read back are derived
# from the row's sections (harness.results.row): a section is where a column is added.

PARQUET = "results.parquet"
CSV = "results.csv"
LOCK = ".lock"


@dataclass(frozen=True)
class TableFormat:
    """A persisted table: its columns (name -> pandas dtype), version and files.

    Columns may be added within a version (a table written before comes back with them
    empty); anything else changes the version.
    """

    label: str  # how messages name it: "results" | "comm"
    columns: Mapping[str, str]
    version: int
    parquet: str
    csv: str
    recovery: str = ""  # where else the rows are kept, for the unreadable-table message
    readable: tuple[int, ...] = ()  # older versions read back (their missing columns empty); () = version only
    # columns every version had and the verbs read (a table without one was not written by a harness, and
    # migrating it would make them empty: every run "failed", a blank samples/s read as ok)
    required: tuple[str, ...] = ()
    filled: tuple[str, ...] = ()  # required columns no row may leave empty
    closed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # column -> the values it may hold


ROW_JSON_GLOB = "runs/*/*/row.json"
RESULTS = TableFormat("results", COLUMNS, SCHEMA_VERSION, PARQUET, CSV,
                      recovery=f"every run's row is also kept in {ROW_JSON_GLOB}: `rosetta rebuild` makes the "
                               f"table again from them", readable=READABLE_VERSIONS,
                      required=("schema_version", "sweep_id", "run_id", "config_id", "scenario", "framework",
                                "workload", "repeat", "status", "throughput", "sample_unit", "timestamp"),
                      filled=("sweep_id", "status"), closed={"status": tuple(values(Status))})


def frame_of(fmt: TableFormat, rows: Iterable[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Rows (dicts, or a frame read back) as a DataFrame with exactly the format's columns and dtypes."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    unknown = set(frame.columns) - set(fmt.columns)
    if unknown:
        raise ValueError(f"columns not in the {fmt.label} schema: {sorted(unknown)}")
    # reindex adds the missing columns at once (empty); one insert per column fragments the frame
    return frame.reindex(columns=list(fmt.columns)).astype(dict(fmt.columns))


def load_table(fmt: TableFormat, results_dir: Path, columns: Sequence[str] | None = None,
               sweeps: Sequence[str] | None = None) -> pd.DataFrame:
    """A whole table (empty, with the format's columns, if there is none yet); ``columns`` and ``sweeps``
    as :func:`read_file`."""
    results_dir = Path(results_dir)
    if results_dir.exists() and not results_dir.is_dir():
        raise UserError(f"{results_dir}: the results folder is a file")
    path = results_dir / fmt.parquet
    if not path.exists():
        empty = frame_of(fmt, [])
        return empty if columns is None else empty[_wanted(fmt, columns)]
    return read_file(fmt, path, columns, sweeps)


def _wanted(fmt: TableFormat, columns: Sequence[str]) -> list[str]:
    """``columns`` and the ones every read checks (the required and filled ones), in the format's order."""
    asked = set(columns) | set(fmt.required) | set(fmt.filled) | set(fmt.closed)
    unknown = asked - set(fmt.columns)
    if unknown:
        raise ValueError(f"columns not in the {fmt.label} schema: {sorted(unknown)}")
    return [c for c in fmt.columns if c in asked]


def read_file(fmt: TableFormat, path: Path, columns: Sequence[str] | None = None,
              sweeps: Sequence[str] | None = None, exact: bool = False) -> pd.DataFrame:
    """A table's Parquet file, migrated on read to the format's columns: every column added since it was
    written comes back empty (no column was ever renamed, dropped or retyped: tests/unit/results/test_old_tables.py
    builds a table of each past schema).

    ``columns``: read only these (and the required ones), the others are never decoded: a store of 10^6 rows
    holds gigabytes of specs and step times a verb may not need. ``sweeps``: only the rows of these sweep ids,
    filtered by the Parquet reader (benchmarks/large_store.py). The file's column names and schema versions are
    checked whatever is asked; the values are checked in the columns and rows read. ``exact``: ``columns``
    alone, not the required ones (what chooses the sweeps to read, whose rows are then read in full)."""
    if path.is_dir():
        raise UserError(f"{path}: is a folder, not a {fmt.label} table")
    present = _checked_columns(fmt, path)
    asked = None if columns is None else list(columns) if exact else _wanted(fmt, columns)
    names = None if asked is None else [c for c in fmt.columns if c in asked and c in present]
    rows = None
    if sweeps is not None:  # the range as well: pyarrow skips row groups by their statistics for it, not for "in"
        ids = sorted(map(str, sweeps))
        rows = [("sweep_id", "in", ids)] + ([("sweep_id", ">=", ids[0]), ("sweep_id", "<=", ids[-1])] if ids else [])
    frame = _readable(fmt, path, lambda: pd.read_parquet(path, columns=names, filters=rows))
    # columns added since it was written come back empty; others, wrong types and ids that are no names refused
    kept = fmt.columns if asked is None else {c: fmt.columns[c] for c in fmt.columns if c in asked}
    frame = integrity.conformed(frame, kept, fmt.label, str(path))
    closed = {c: allowed for c, allowed in fmt.closed.items() if c in kept}
    integrity.check_filled(frame, tuple(c for c in fmt.filled if c in kept), closed, str(path))
    return frame


def _readable(fmt: TableFormat, path: Path, read):
    """``read()``, a pyarrow error as one line naming the file and where else the rows are kept."""
    try:
        return read()
    except (OSError, ValueError, pa.ArrowException) as exc:  # pyarrow's errors derive from these
        hint = f"; {fmt.recovery}" if fmt.recovery else ""
        raise UserError(f"{path}: not a readable {fmt.label} table ({_first_line(exc)}){hint}") from None


def _checked_columns(fmt: TableFormat, path: Path) -> list[str]:
    """The file's column names, once its schema versions, required columns and column names are known to be
    this format's (from its footer and its schema_version column alone)."""
    present = _readable(fmt, path, lambda: pq.read_schema(path).names)
    if "schema_version" not in present:
        raise UserError(f"{path}: no schema_version column: not a {fmt.label} table this harness wrote")
    column = _readable(fmt, path, lambda: pq.read_table(path, columns=["schema_version"]).column(0))
    versions = set(column.drop_null().unique().to_pylist())
    readable = set(fmt.readable) | {fmt.version}
    if versions - readable:
        raise UserError(f"{path}: {fmt.label} schema versions {sorted(versions, key=str)}; this harness reads "
                        f"{', '.join(map(str, sorted(readable)))}")
    missing = [c for c in fmt.required if c not in present]
    if missing:
        raise UserError(f"{path}: no {', '.join(missing)} column{'s' * (len(missing) > 1)}: every {fmt.label} table "
                        f"has had {'them' if len(missing) > 1 else 'one'}; not a table this harness wrote (edited?)")
    unknown = sorted(set(present) - set(fmt.columns))
    if unknown:  # read or not, a foreign column means a foreign table
        raise UserError(f"{path}: columns not in the {fmt.label} schema: {', '.join(unknown)} (written by another "
                        f"harness, or edited)")
    return present


def sweep_order(fmt: TableFormat, source: Path, also: Sequence[str] = ()) -> pd.DataFrame:
    """The sweep_id and timestamp columns alone (and ``also``) of a results folder's table or a table's file,
    checked as :func:`read_file` checks them: what a verb reads to choose its sweeps before it reads their rows."""
    source = Path(source)
    wanted = list(dict.fromkeys(["sweep_id", "timestamp", *also]))
    if source.is_file():
        return read_file(fmt, source, wanted, exact=True)[wanted]
    if source.exists() and not source.is_dir():
        raise UserError(f"{source}: the results folder is a file")
    if not (source / fmt.parquet).exists():
        return frame_of(fmt, [])[wanted]
    return read_file(fmt, source / fmt.parquet, wanted, exact=True)[wanted]


def nothing_yet(results_dir: Path) -> str:
    """What to say of a results folder without rows: run something, or rebuild a lost table from its rows."""
    if not (results_dir / PARQUET).exists() and next(results_dir.glob(ROW_JSON_GLOB), None) is not None:
        return (f"{results_dir}: no {PARQUET}, but runs' row.json copies are there: `rosetta rebuild --results "
                f"{results_dir}` makes the table again from them")
    return f"{results_dir}: no results yet; run `rosetta run` first"


def is_busy(row: Mapping[str, Any]) -> bool:
    """Whether a row was measured on a busy machine (``machine_busy`` true); False where it is empty
    (a row from before version 3, or a run without telemetry): such rows are judged as before."""
    value = row.get("machine_busy")
    return bool(value) if value is not None and not pd.isna(value) else False


def busy_figure(row: Mapping[str, Any]) -> str:
    """A busy row's reason in a few words, for verdicts that leave it unjudged."""
    note = row.get("busy_note")
    if isinstance(note, str) and note:
        return note
    share = row.get("other_cpu_share")
    return f"other processes used {share:.0%} of the CPUs" if share is not None and not pd.isna(share) else "machine busy"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def append_table(fmt: TableFormat, results_dir: Path, rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Add rows to a table and rewrite its files atomically; returns the new table.

    Holds the folder's lock, so that two harnesses sharing a results folder never
    lose each other's rows.
    """
    results_dir = integrity.writable_folder(Path(results_dir))
    with locked(results_dir):
        _remove_stale_temporaries(results_dir, fmt)
        table = pd.concat([load_table(fmt, results_dir), frame_of(fmt, rows)], ignore_index=True)
        atomic_write(results_dir / fmt.parquet, lambda p: write_parquet(table, p))
        atomic_write(results_dir / fmt.csv, lambda p: table.to_csv(p, index=False))
    return table


# Rows per Parquet row group: rows are appended in time order, so that a group's sweep_id statistics (min, max)
# let a read of one sweep skip the others' groups undecoded (one group of 10^6 rows is decoded whole).
ROW_GROUP = 20_000


def write_parquet(frame: pd.DataFrame, path) -> None:
    """``frame`` as a Parquet file in row groups of ROW_GROUP rows."""
    frame.to_parquet(path, index=False, row_group_size=ROW_GROUP)


def to_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Result rows as a DataFrame with exactly the schema's columns and dtypes."""
    return frame_of(RESULTS, rows)


def load(results_dir: Path, columns: Sequence[str] | None = None, sweeps: Sequence[str] | None = None) -> pd.DataFrame:
    """The whole results table (empty with the schema's columns if there is none yet); ``columns``: only
    these (and the required ones); ``sweeps``: only these sweeps' rows (see :func:`read_file`)."""
    return load_table(RESULTS, results_dir, columns, sweeps)


def append(results_dir: Path, rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Add rows to the results table (see :func:`append_table`)."""
    return append_table(RESULTS, results_dir, rows)


@contextmanager
def locked(results_dir: Path):
    fd = os.open(results_dir / LOCK, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock, as does the death of the process


def _remove_stale_temporaries(results_dir: Path, fmt: TableFormat) -> None:
    """Temporaries a killed harness left half-written (only called with the lock held)."""
    for name in (fmt.parquet, fmt.csv):
        for tmp in results_dir.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)


def write_row_json(path: Path, row: dict[str, Any]) -> None:
    atomic_write(path, lambda p: Path(p).write_text(json.dumps(row, indent=2, default=str)))


def umask() -> int:
    """The process's file-creation mask (read by setting and restoring it: there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename over ``path``: readers see the old file or the new one.

    The file gets the mode an ordinary new file gets (0666 less the umask, usually 0644), not the
    temporary file's private 0600: on a shared cluster others read the table.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~umask())
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
