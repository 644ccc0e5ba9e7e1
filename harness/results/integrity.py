"""What a table read back must be before anything uses it, and where the harness may write.

A table is data from outside (edited, damaged, written by another version): its identifiers become file
names (``runs/<sweep_id>/``, ``report-<sweep_id>.png``), so each is checked to be one name, never a path;
its columns must be the schema's, each of its type. Any failure is one line naming the file, the column and
the row. The results folder is the one place the harness writes, so that it is checked to be a writable
folder before a sweep spends time on its first run.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from harness.base.errors import UserError

# One file name: a letter or digit first (never "." or ".."), then letters, digits, '.', '_', '+', '-'.
_NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}"
IDENTIFIER = re.compile(_NAME)
RUN_ID = re.compile(rf"{_NAME}(?:/{_NAME})*")  # <sweep_id>/<run folder> (older tables: more parts)
ID_COLUMNS = {"sweep_id": IDENTIFIER, "run_id": RUN_ID, "config_id": IDENTIFIER}
NAME_RULE = "letters, digits, '.', '_', '+', '-', a letter or digit first, at most 128"
# Figures no run can measure below zero (rates, times, sizes of the run): such a value, or any infinity, is a
# damaged table, refused at read rather than divided by in a report. (Zero is kept: a run whose steps took
# forever has throughput 0, and the reports judge it so.)
POSITIVE = ("world_size", "nodes", "procs_per_node", "batch_per_worker", "global_batch")  # a run's size: >= 1
NON_NEGATIVE = ("throughput", "plain_throughput", "loader_throughput", "window_s", "world_size", "nodes",
                "procs_per_node", "batch_per_worker", "global_batch", "repeat", "samples_measured",
                "step_time_p50_s", "step_time_p90_s", "launch_s", "compile_s")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def checked_id(value: str, what: str) -> str:
    """``value`` when it is one file name (see IDENTIFIER), else a one-line :class:`UserError` naming ``what``."""
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
        raise UserError(f"{what}: {_shown(value)} is not an identifier ({NAME_RULE}); ids become file names")
    return value


def check_identifiers(frame: pd.DataFrame, where: str) -> None:
    """Every sweep_id and config_id of ``frame`` is one name, run_id names joined by "/"; empty ones pass."""
    for column, pattern in ID_COLUMNS.items():
        if column not in frame.columns:
            continue
        values = frame[column].dropna()
        if str(values.dtype) == "string":  # one regular expression over the column (10^6 rows: no Python loop)
            wrong = values[~values.str.fullmatch(pattern.pattern).astype(bool)]
        else:
            wrong = values[[not isinstance(v, str) or not pattern.fullmatch(v) for v in values]]
        if len(wrong):
            row, value = wrong.index[0], wrong.iloc[0]
            raise UserError(f"{where}: row {row}: {column} {_shown(value)} is not an identifier ({NAME_RULE}); "
                            f"the table was edited or damaged")


def conformed(frame: pd.DataFrame, columns: Mapping[str, str], label: str, where: str) -> pd.DataFrame:
    """``frame`` with exactly ``columns`` (name -> pandas dtype), missing ones empty; a column not in them or
    a value of the wrong type is a one-line :class:`UserError` naming it."""
    unknown = sorted(set(map(str, frame.columns)) - set(columns))
    if unknown:
        raise UserError(f"{where}: columns not in the {label} schema: {', '.join(unknown)} (written by another "
                        f"harness, or edited)")
    frame = frame.reindex(columns=list(columns))
    for column, dtype in columns.items():
        try:
            frame[column] = frame[column].astype(dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise UserError(f"{where}: column {column}: values of the wrong type for {dtype} "
                            f"({str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__})") from None
    check_identifiers(frame, where)
    check_figures(frame, where)
    return frame


def check_filled(frame: pd.DataFrame, filled: tuple[str, ...], closed: Mapping[str, tuple[str, ...]],
                 where: str) -> None:
    """No empty cell in the ``filled`` columns, and only the allowed values in the ``closed`` ones (a status
    of 1 would count as a failed run)."""
    for column in filled:
        empty = frame.index[frame[column].isna()]
        if len(empty):
            raise UserError(f"{where}: row {empty[0]}: {column} is empty; every row has one (the table was edited "
                            f"or damaged)")
    for column, allowed in closed.items():
        bad = frame[column].dropna()
        bad = bad[~bad.isin(allowed)]
        if len(bad):
            raise UserError(f"{where}: row {bad.index[0]}: {column} {_shown(bad.iloc[0])} is not one of "
                            f"{', '.join(allowed)}; the table was edited or damaged")


def check_figures(frame: pd.DataFrame, where: str) -> None:
    """No infinity in any number column, nothing < 0 in NON_NEGATIVE ones (empty cells pass: a run that
    measured nothing)."""
    for column in frame.columns:
        if str(frame[column].dtype) not in ("Float64", "Int64"):
            continue
        values = frame[column].dropna().astype(float)
        least = 1 if column in POSITIVE else 0 if column in NON_NEGATIVE else -math.inf
        bad = values[(values.abs() == math.inf) | (values < least)]
        if len(bad):
            expected = "finite" if least == -math.inf else f">= {least}"
            raise UserError(f"{where}: row {bad.index[0]}: {column} {bad.iloc[0]!r} is no measurement ({expected} "
                            f"expected); the table was edited or damaged")
    check_json(frame, where)


# Columns holding JSON (a list or object as text); step_times_s must be a list of numbers (reports pool them).
JSON_COLUMNS = ("strategy_options", "hosts", "step_times_s", "staleness_hist", "stage_idle_fractions", "stage_layers",
                "stage_flops_shares", "stage_time_shares", "rank_peak_rss_mb", "rank_peak_gpu_allocated_mb",
                "rank_peak_gpu_reserved_mb", "accuracy_curve", "mlperf_violations", "versions", "spec")


# A JSON list of numbers as Python's json reads it (NaN, Infinity allowed, no true/false): step_times_s cells are
# checked by this expression over the whole column, the few it refuses by json itself (for the message).
_NUMBER = r"(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|NaN|-?Infinity)"
_SPACE = r"[ \t\n\r]*"
NUMBER_LIST = rf"{_SPACE}\[{_SPACE}(?:{_NUMBER}(?:{_SPACE},{_SPACE}{_NUMBER})*)?{_SPACE}\]{_SPACE}"


def _to_parse(values: pd.Series, column: str) -> pd.Series:
    """The cells of a JSON column that json itself must read: each distinct text once (a spec repeats over a
    configuration's rows), and of step_times_s only those the list-of-numbers expression refuses."""
    if column == "step_times_s" and str(values.dtype) == "string":
        values = values[~values.str.fullmatch(NUMBER_LIST).astype(bool)]
    return values[~values.duplicated()]


def check_json(frame: pd.DataFrame, where: str) -> None:
    """Every cell of a JSON column parses (NaN and Infinity as Python's json reads them); step_times_s is a
    list of numbers."""
    for column in (c for c in JSON_COLUMNS if c in frame.columns):
        for row, text in _to_parse(frame[column].dropna(), column).items():
            try:
                value = json.loads(text)
            except (TypeError, ValueError):
                raise UserError(f"{where}: row {row}: {column} {_shown(text)} is not JSON; the table was edited or "
                                f"damaged") from None
            if column == "step_times_s" and not (isinstance(value, list) and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
                raise UserError(f"{where}: row {row}: step_times_s {_shown(text)} is not a list of seconds; the "
                                f"table was edited or damaged")


def writable_folder(folder: Path, what: str = "the results folder") -> Path:
    """``folder``, made if missing, where a file can be written; else a one-line :class:`UserError`."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder}: {what} is a file")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".rosetta-write-check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{folder}: {what} is not writable ({exc.strerror or type(exc).__name__})") from None
    return folder


def writable_file(path: Path, what: str) -> Path:
    """``path`` as a file to write (its folder made if missing); a folder there, or a file where its folder
    should be, is a one-line :class:`UserError` naming ``what``. Checked before anything is printed."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what}: {path} is a folder, not a file")
    writable_folder(path.parent, f"the folder of {what}")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"{what}: {path} is not writable")
    return path
