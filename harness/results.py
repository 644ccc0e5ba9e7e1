"""The results table: one tidy row per run, a schema version on every row.

Every row is also kept as ``row.json`` in its run's folder. The table
(``results.parquet`` and ``results.csv`` in the results folder) is rewritten
atomically (a temporary file, then rename) after each run, so a crash at any
moment leaves the previous complete table in place.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

SCHEMA_VERSION = 2  # 2: strategy options, bytes on the wire, time-to-accuracy columns
READABLE_VERSIONS = {1, 2}  # a version-1 row reads with the newer columns empty

# Column -> pandas dtype. Order is the order in files.
COLUMNS: dict[str, str] = {
    "schema_version": "Int64",
    "sweep_id": "string",
    "run_id": "string",
    "config_id": "string",
    "scenario": "string",
    "framework": "string",
    "workload": "string",
    "size": "string",
    "nodes": "Int64",
    "procs_per_node": "Int64",
    "world_size": "Int64",
    "batch_per_worker": "Int64",
    "global_batch": "Int64",
    "strategy": "string",
    "strategy_options": "string",  # JSON object: the strategy's resolved options (harness.strategies)
    "storage": "string",
    "launcher": "string",
    "device_requested": "string",
    "device": "string",
    "repeat": "Int64",
    "warmup_steps": "Int64",
    "measured_steps": "Int64",
    "status": "string",
    "reason": "string",
    "throughput": "Float64",  # samples/s over the measured window, slowest rank's wall time
    "sample_unit": "string",  # images | sequences
    "samples_measured": "Int64",  # global samples in the measured window, counted on every rank
    "window_s": "Float64",  # slowest rank's measured wall time (s)
    "step_time_p50_s": "Float64",
    "step_time_p90_s": "Float64",
    "step_times_s": "string",  # JSON list: per measured step, the slowest rank's time (s)
    "first_loss": "Float64",
    "last_loss": "Float64",
    "bytes_per_step": "Float64",  # bytes one rank hands to collectives per measured step (payload; max over ranks)
    "compression_ratio": "Float64",  # fp32 gradient allreduce bytes per step / bytes_per_step
    "target_accuracy": "Float64",  # held-out accuracy (fraction) a time-to-accuracy run aims at
    "steps_to_target": "Int64",  # training steps (warm-up included) until the first evaluation >= target
    "time_to_target_s": "Float64",  # training seconds until then (slowest rank per step, evaluation excluded)
    "final_accuracy": "Float64",  # held-out accuracy (fraction) of the final model
    "accuracy_curve": "string",  # JSON list of [step, held-out accuracy, held-out loss], rank 0's model
    "weights_consistent": "boolean",
    "weights_checksum": "string",
    "parameters": "Int64",
    "launch_s": "Float64",  # wall time of the whole launch, start-up included (s)
    "framework_version": "string",
    "versions": "string",  # JSON object: library -> version, as the workers reported
    "host": "string",
    "os": "string",
    "cpu_model": "string",
    "cpu_cores": "Int64",
    "gpu_model": "string",
    "gpu_count": "Int64",
    "gpu_driver": "string",
    "harness_version": "string",
    "harness_commit": "string",
    "timestamp": "string",  # UTC, ISO 8601, when the run finished
    "spec": "string",  # JSON: the full expanded run spec
    "run_dir": "string",
}

PARQUET = "results.parquet"
CSV = "results.csv"


def to_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a DataFrame with exactly the schema's columns and dtypes."""
    frame = pd.DataFrame(list(rows))
    for column in COLUMNS:
        if column not in frame:
            frame[column] = None
    unknown = set(frame.columns) - set(COLUMNS)
    if unknown:
        raise ValueError(f"columns not in schema: {sorted(unknown)}")
    return frame[list(COLUMNS)].astype(COLUMNS)


def load(results_dir: Path) -> pd.DataFrame:
    """The whole results table (empty with the schema's columns if there is none yet)."""
    path = Path(results_dir) / PARQUET
    if not path.exists():
        return to_frame([])
    frame = pd.read_parquet(path)
    versions = set(frame["schema_version"].dropna().unique())
    if versions - READABLE_VERSIONS:
        raise ValueError(f"{path}: schema versions {sorted(versions)}; this harness reads "
                         f"{', '.join(map(str, sorted(READABLE_VERSIONS)))}")
    for column in COLUMNS:  # rows of an older version lack the newer columns
        if column not in frame:
            frame[column] = None
    return frame[list(COLUMNS)].astype(COLUMNS)


def append(results_dir: Path, rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Add rows to the table and rewrite its files atomically; returns the new table."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    table = pd.concat([load(results_dir), to_frame(rows)], ignore_index=True)
    atomic_write(results_dir / PARQUET, lambda p: table.to_parquet(p, index=False))
    atomic_write(results_dir / CSV, lambda p: table.to_csv(p, index=False))
    return table


def write_row_json(path: Path, row: dict[str, Any]) -> None:
    atomic_write(path, lambda p: Path(p).write_text(json.dumps(row, indent=2, default=str)))


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename over ``path``: readers see the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
