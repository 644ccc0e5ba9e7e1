"""The collective microbenchmark table (``rosetta comm``): one tidy row per backend, world size,
collective and message size, with a schema version on every row.

Kept apart from the training results (``results.parquet``) because its rows have other
dimensions; it lives in the same folder as ``comm.parquet`` and ``comm.csv``, written
atomically under the folder's lock, as the training table is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from harness import results
from harness.errors import UserError

COMM_SCHEMA_VERSION = 1

COMM_COLUMNS: dict[str, str] = {
    "schema_version": "Int64",
    "sweep_id": "string",
    "run_id": "string",  # <sweep>/<launch folder>: one launch per backend and world size
    "backend": "string",  # gloo | nccl | mpi | horovod
    "device": "string",  # cpu | cuda: where the buffers live
    "launcher": "string",
    "nodes": "Int64",
    "procs_per_node": "Int64",
    "world_size": "Int64",
    "collective": "string",  # allreduce | broadcast | allgather
    "dtype": "string",
    "bytes": "Int64",  # message size (nccl-tests convention; allgather: the gathered output)
    "warmup_iters": "Int64",
    "iters": "Int64",  # timed iterations
    "status": "string",
    "reason": "string",
    "time_p50_s": "Float64",  # median over iterations of the slowest rank's time (s)
    "time_mean_s": "Float64",  # mean of the same (s); nccl-tests reports this one
    "time_min_s": "Float64",
    "time_p90_s": "Float64",
    "algbw_GBps": "Float64",  # bytes / time_p50_s, in 1e9 bytes/s
    "busbw_GBps": "Float64",  # algbw x bus factor (harness.comm_bandwidth), 1e9 bytes/s
    "times_s": "string",  # JSON list: per timed iteration, the slowest rank's time (s)
    "launch_s": "Float64",  # wall time of the whole launch, start-up included (s)
    "versions": "string",  # JSON object: library -> version, as the workers reported
    "gpu_model": "string",
    "gpu_count": "Int64",
    "host": "string",
    "os": "string",
    "cpu_model": "string",
    "cpu_cores": "Int64",
    "gpu_driver": "string",
    "harness_version": "string",
    "harness_commit": "string",
    "timestamp": "string",  # UTC, ISO 8601
    "run_dir": "string",
}

PARQUET = "comm.parquet"
CSV = "comm.csv"


def to_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows))
    for column in COMM_COLUMNS:
        if column not in frame:
            frame[column] = None
    unknown = set(frame.columns) - set(COMM_COLUMNS)
    if unknown:
        raise ValueError(f"columns not in the comm schema: {sorted(unknown)}")
    return frame[list(COMM_COLUMNS)].astype(COMM_COLUMNS)


def load(results_dir: Path) -> pd.DataFrame:
    """The whole comm table (empty, with the schema's columns, if there is none yet)."""
    path = Path(results_dir) / PARQUET
    if not path.exists():
        return to_frame([])
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable comm table ({exc})") from None
    versions = set(frame["schema_version"].dropna().unique())
    if versions - {COMM_SCHEMA_VERSION}:
        raise UserError(f"{path}: comm schema versions {sorted(versions)}; this harness reads {COMM_SCHEMA_VERSION}")
    missing = set(COMM_COLUMNS) - set(frame.columns)
    if missing:
        raise UserError(f"{path}: columns missing from the comm table: {', '.join(sorted(missing))}")
    return frame[list(COMM_COLUMNS)].astype(COMM_COLUMNS)


def append(results_dir: Path, rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Add rows and rewrite ``comm.parquet`` and ``comm.csv`` atomically under the folder's lock."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    with results._locked(results_dir):
        table = pd.concat([load(results_dir), to_frame(rows)], ignore_index=True)
        results.atomic_write(results_dir / PARQUET, lambda p: table.to_parquet(p, index=False))
        results.atomic_write(results_dir / CSV, lambda p: table.to_csv(p, index=False))
    return table
