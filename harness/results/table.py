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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from harness.base.errors import UserError
from harness.results import integrity

SCHEMA_VERSION = 5  # 2: emulated accelerators (accelerator ... loader_cpu_bound), checkpoint_* and plain_throughput;
# added within 2 (older rows read back with them empty): stage_layers, stage_flops_shares, stage_time_shares,
# partitions_loaded, partition_load_s_p50, partition_load_s_max, partition_load_mb_s; rules, dataset_bytes ...
# mlperf_replication_spread (the page-cache flag and MLPerf Storage's rules);
# 3: model FLOPs and MFU (model_flops_per_sample ... mfu), peak memory of every strategy's ranks (peak_rss_mb
# now from every rank's supervisor) and accelerator memory (peak_gpu_*);
# 4: what else ran on the machine (other_cpu_share, load_avg, steal_share, cpu_mhz, machine_busy, busy_note)
# 5: the emulated cluster (exchange, intra_link, inter_link, dilation, emulation_late_s, emulation_saturated);
# added within 5: exchange_s, exchange_cpu_busy (the exchange of the frameworks that run it after the backward),
# input_workers, input_rate (the emulated host's loader), step_variation (the emulated steps' measured spread)
READABLE_VERSIONS = (1, 2, 3, 4, 5)  # older tables read back with the new columns empty (machine_busy: unknown)

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
    "strategy_options": "string",  # JSON object: the strategy's resolved options (harness.experiment.strategies)
    "storage": "string",
    "launcher": "string",
    "network": "string",  # link cap between hosts: unlimited | e.g. 1gbit
    "precision": "string",  # fp32 | tf32 | amp_fp16 | amp_bf16
    "memory_format": "string",  # contiguous | channels_last
    "compile": "string",  # off | on
    "layout": "string",  # layout the convolutions ran in, as the worker read it back: NCHW | NHWC (empty: none)
    "hosts": "string",  # JSON list: the hosts the ranks ran on, as they reported
    "image": "string",  # the container image the ranks ran in (ROSETTA_IMAGE), if any
    "image_id": "string",  # its ID (sha256:...) where the launcher knew it (podman)
    "image_digest": "string",  # its registry digest, likewise (empty for an image never pushed or pulled)
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
    "cpu_util_pct": "Float64",  # mean CPU use of a rank's process tree in the window (% of one core)
    "rss_max_mb": "Float64",  # largest resident memory of a rank's process tree (MiB)
    "gpu_util_pct": "Float64",  # mean GPU utilization (%), empty without a GPU
    "gpu_mem_max_mb": "Float64",  # largest GPU memory used (MiB)
    "gpu_power_w": "Float64",  # mean GPU power draw (W)
    "gpu_sm_clock_mhz": "Float64",  # mean SM clock (MHz)
    "telemetry_samples": "Int64",  # samples in the window, all ranks together
    "other_cpu_share": "Float64",  # CPU time of processes outside the run / the machine's CPU time, window (busiest machine)
    "load_avg": "Float64",  # mean 1-minute load average over the window (the run's own threads included)
    "steal_share": "Float64",  # CPU time the hypervisor gave to other guests / the machine's CPU time (0 on bare metal)
    "cpu_mhz": "Float64",  # mean current CPU frequency (MHz) where the kernel reports it, slowest machine
    "machine_busy": "boolean",  # other load beyond harness.contract.machine_load's thresholds (empty: not sampled)
    "busy_note": "string",  # why machine_busy: the other load, oversubscribed cores, steal
    "first_loss": "Float64",
    "last_loss": "Float64",
    "bytes_per_step": "Float64",  # bytes one rank hands to collectives per measured step (payload; max over ranks)
    "compression_ratio": "Float64",  # fp32 gradient allreduce bytes per step / bytes_per_step
    "staleness_mean": "Float64",  # asynchronous strategies: updates applied by others between a read and an update
    "staleness_max": "Int64",  # the most of them, any update in the window
    "staleness_hist": "string",  # JSON object: staleness -> updates, all ranks, measured window
    "server_bytes_in_per_step": "Float64",  # parameter servers: payload the busiest server took in per step
    "server_bytes_out_per_step": "Float64",  # and sent out per step (bytes)
    "plain_throughput": "Float64",  # samples/s of the same loop without the DDP wrapper (world size 1, torch_ddp)
    "p2p_bytes_per_step": "Float64",  # bytes one rank sends point-to-point (pipeline activations) per step (max)
    "stage_idle_fractions": "string",  # JSON list by pipeline stage: 1 - its compute seconds / window seconds
    "pipeline_bubble_predicted": "Float64",  # GPipe's idle fraction (p - 1) / (m + p - 1) for this run
    "stage_layers": "string",  # JSON list by pipeline stage: the names of the layers it holds (the cut)
    "stage_flops_shares": "string",  # JSON list by pipeline stage: its share of the model's forward FLOPs
    "stage_time_shares": "string",  # JSON list by pipeline stage: its share of the layers' measured time (balance time)
    "peak_rss_mb": "Float64",  # largest peak resident memory of a rank's worker process (MiB, exact: getrusage)
    "rank_peak_rss_mb": "string",  # JSON list by rank: each worker process's peak resident memory (MiB)
    "peak_gpu_allocated_mb": "Float64",  # accelerator memory the framework allocated to tensors at most, largest rank (MiB)
    "rank_peak_gpu_allocated_mb": "string",  # JSON list by rank (null: a rank that held none)
    "peak_gpu_reserved_mb": "Float64",  # accelerator memory its caching allocator reserved at most, largest rank (MiB)
    "rank_peak_gpu_reserved_mb": "string",  # JSON list by rank (null: a rank that held none)
    "model_flops_per_sample": "Float64",  # training FLOPs of one sample: 3 x forward, layer by layer (harness.machines.model_flops)
    "achieved_tflops": "Float64",  # model_flops_per_sample x throughput / peak_devices / 1e12: per device
    "peak_tflops": "Float64",  # one device's dense peak at the run's precision (TFLOP/s)
    "peak_source": "string",  # where peak_tflops comes from: the peak table's source, or "measured: ..." (CPU)
    "peak_devices": "Int64",  # devices the peak counts: GPUs (one per rank), or nodes (a CPU machine each)
    "mfu": "Float64",  # model FLOPs utilization: achieved_tflops / peak_tflops (fraction)
    "strategy_note": "string",  # what the framework did not do that the run asked for (e.g. Horovod's hierarchy)
    "target_accuracy": "Float64",  # held-out accuracy (fraction) a time-to-accuracy run aims at
    "steps_to_target": "Int64",  # training steps (warm-up included) until the first evaluation >= target
    "time_to_target_s": "Float64",  # training seconds until then (slowest rank per step, evaluation excluded)
    "final_accuracy": "Float64",  # held-out accuracy (fraction) of the final model
    "accuracy_curve": "string",  # JSON list of [step, held-out accuracy, held-out loss], rank 0's model
    "weights_consistent": "boolean",
    "data_stall_frac": "Float64",  # measured window's time spent waiting for the next batch / window time (worst rank)
    "read_mb_s": "Float64",  # bytes read from storage in the window, all ranks, MB (1e6) per second
    "loader_throughput": "Float64",  # samples/s of the input pipeline alone (no model), all ranks
    "cache_hit_rate": "Float64",  # cached storage: fraction of object reads served from the local cache
    "objects_verified": "Int64",  # objects whose sha256 was checked against the manifest, all ranks
    "staging_s": "Float64",  # copy-to-local staging before training (s, slowest rank), if staged
    "partitions_loaded": "Int64",  # BERT: partitions read to their last byte in the window, all ranks
    "partition_load_s_p50": "Float64",  # BERT: median seconds one partition took to load (open to last byte, reading only)
    "partition_load_s_max": "Float64",  # BERT: the longest of them (s)
    "partition_load_mb_s": "Float64",  # BERT: those partitions' bytes / their load seconds, MB (1e6) per second
    "accelerator": "string",  # device emulated: the accelerator profile each rank stood for (or custom)
    "compute_s": "Float64",  # device emulated: profiled compute time per step (s), as slept
    "compute_source": "string",  # where compute_s came from (harness/machines/accelerators.toml)
    "emulated_step": "string",  # sleep (the emulation) | spin (a busy loop of the same length: fidelity check)
    "compute_error_frac": "Float64",  # |mean time a step's compute took - compute_s| / compute_s, worst rank
    "au": "Float64",  # accelerator utilization: compute_s x steps / window time, slowest rank (MLPerf Storage)
    "au_threshold": "Float64",  # the AU a result must keep (0.90 for ResNet-50)
    "au_ok": "boolean",  # au >= au_threshold
    "host_cpu_busy": "Float64",  # the machine's CPU busy fraction in the window (every process on it)
    "loader_busy": "Float64",  # a rank's loader processes' CPU seconds / (window x loader workers), worst rank
    "loader_cpu_bound": "boolean",  # AU under threshold, worst data stall >= a quarter of the shortfall, CPUs or loaders saturated
    "exchange": "string",  # device emulated: barrier (MLPerf Storage's) | gradients (the emulated cluster's)
    "intra_link": "string",  # the emulated link between GPUs of a host (harness/machines/interconnects.toml)
    "inter_link": "string",  # the emulated network card of each host
    "dilation": "Float64",  # time dilation k: measured seconds were divided by it (throughput x k)
    "step_variation": "string",  # the measured spread the emulated GPUs' steps drew from; empty: exact steps
    "emulation_late_s": "Float64",  # how far behind its profiled schedule the emulated compute ran, worst rank (s, dilated)
    "emulation_saturated": "boolean",  # this machine's CPU, not the emulated cluster, limited the step (host_cpu_busy
    #                                    or exchange_cpu_busy)
    "exchange_s": "Float64",  # an exchange after the backward (tf_mwms, chainer): its mean time a step (s, cluster's)
    "exchange_cpu_busy": "Float64",  # the machine's CPU busy fraction during those exchanges, worst rank
    "input_workers": "Int64",  # the emulated host's loader workers per GPU (its stall: data_stall_frac)
    "input_rate": "Float64",  # samples/s one of them prepares, as given (undilated)
    "checkpoint_mode": "string",  # single (rank 0 writes one file, every rank reads it) | sharded (one per rank)
    "checkpoint_bytes": "Int64",  # bytes written by all ranks
    "checkpoint_save_s": "Float64",  # save phase: slowest rank's seconds from the starting barrier
    "checkpoint_save_gb_s": "Float64",  # checkpoint_bytes / 1e9 / checkpoint_save_s
    "checkpoint_load_s": "Float64",  # load phase: slowest rank's seconds (read and deserialize)
    "checkpoint_load_gb_s": "Float64",  # bytes read by all ranks / 1e9 / checkpoint_load_s
    "checkpoint_cache_defeat": "string",  # how the page cache was kept out (fsync+fadvise_dontneed, rank_shift, ...)
    "rules": "string",  # the run rules it followed: rosetta | mlperf_storage (MLPerf Storage v2.0's, docs/storage.md)
    "dataset_bytes": "Int64",  # real data: bytes of the objects the run's layout reads, the whole dataset
    "client_memory_gb": "Float64",  # this machine's memory (GiB, 2^30): what MLPerf Storage's 5x rule counts
    "memory_available_gb": "Float64",  # memory available when the run started (GiB): what the page cache could hold
    "page_cache_drop": "string",  # how the page cache was emptied before the run: drop_caches | fadvise_dontneed | none
    "potential_caching": "boolean",  # whether the run's reads could have come from the page cache (DLIO's flag)
    "potential_caching_why": "string",  # why or why not: dataset vs available memory, emptied, objects read again
    "au_rules": "Float64",  # MLPerf Storage's AU: every step from step 1, the first's time and compute left out, mean of ranks
    "throughput_rules": "Float64",  # MLPerf Storage's samples/s: every step from step 1 (the first included), summed over ranks
    "checkpoint_save_gb_s_rules": "Float64",  # MLPerf Storage's checkpoint write GB/s: the minimum over ranks of their own
    "checkpoint_load_gb_s_rules": "Float64",  # and read GB/s (a rank's bytes / its seconds; ranks that moved none left out)
    "mlperf_compliant": "boolean",  # rules mlperf_storage: the run (its set, on a set's last run) keeps every rule
    "mlperf_violations": "string",  # JSON list, one "<rule>: <why>" per rule broken (harness/results/mlperf.py)
    "mlperf_replication_spread": "Float64",  # a set's last run: (max - min) / min of the rules' samples/s after the warm-up run
    "weights_checksum": "string",
    "parameters": "Int64",
    "compile_s": "Float64",  # first step with compilation (compile = on), outside the window (s)
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
    "mpi": "string",  # the MPI mpirun on PATH belongs to, and its path (None without MPI)
    "harness_version": "string",
    "harness_commit": "string",
    "timestamp": "string",  # UTC, ISO 8601, when the run finished
    "spec": "string",  # JSON: the full expanded run spec
    "run_dir": "string",
}

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


ROW_JSON_GLOB = "runs/*/*/row.json"
RESULTS = TableFormat("results", COLUMNS, SCHEMA_VERSION, PARQUET, CSV,
                      recovery=f"every run's row is also kept in {ROW_JSON_GLOB}: `rosetta rebuild` makes the "
                               f"table again from them", readable=READABLE_VERSIONS)


def frame_of(fmt: TableFormat, rows: Iterable[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Rows (dicts, or a frame read back) as a DataFrame with exactly the format's columns and dtypes."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    unknown = set(frame.columns) - set(fmt.columns)
    if unknown:
        raise ValueError(f"columns not in the {fmt.label} schema: {sorted(unknown)}")
    # reindex adds the missing columns at once (empty); one insert per column fragments the frame
    return frame.reindex(columns=list(fmt.columns)).astype(dict(fmt.columns))


def load_table(fmt: TableFormat, results_dir: Path) -> pd.DataFrame:
    """A whole table (empty, with the format's columns, if there is none yet)."""
    results_dir = Path(results_dir)
    if results_dir.exists() and not results_dir.is_dir():
        raise UserError(f"{results_dir}: the results folder is a file")
    path = results_dir / fmt.parquet
    if not path.exists():
        return frame_of(fmt, [])
    return read_file(fmt, path)


def read_file(fmt: TableFormat, path: Path) -> pd.DataFrame:
    """A table's Parquet file, migrated on read to the format's columns: every column added since it was
    written comes back empty (no column was ever renamed, dropped or retyped: tests/unit/results/test_old_tables.py
    builds a table of each past schema)."""
    if path.is_dir():
        raise UserError(f"{path}: is a folder, not a {fmt.label} table")
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        hint = f"; {fmt.recovery}" if fmt.recovery else ""
        raise UserError(f"{path}: not a readable {fmt.label} table ({_first_line(exc)}){hint}") from None
    if "schema_version" not in frame.columns:
        raise UserError(f"{path}: no schema_version column: not a {fmt.label} table this harness wrote")
    versions = set(frame["schema_version"].dropna().unique())
    readable = set(fmt.readable) | {fmt.version}
    if versions - readable:
        raise UserError(f"{path}: {fmt.label} schema versions {sorted(versions, key=str)}; this harness reads "
                        f"{', '.join(map(str, sorted(readable)))}")
    # columns added since it was written come back empty; others, wrong types and ids that are no names refused
    return integrity.conformed(frame, fmt.columns, fmt.label, str(path))


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
        atomic_write(results_dir / fmt.parquet, lambda p: table.to_parquet(p, index=False))
        atomic_write(results_dir / fmt.csv, lambda p: table.to_csv(p, index=False))
    return table


def to_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Result rows as a DataFrame with exactly the schema's columns and dtypes."""
    return frame_of(RESULTS, rows)


def load(results_dir: Path) -> pd.DataFrame:
    """The whole results table (empty with the schema's columns if there is none yet)."""
    return load_table(RESULTS, results_dir)


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
