"""What of a result row MLflow gets, as plain data (no MLflow import): its dimensions as parameters, its
measurements as metrics (the per-step times and the accuracy curve as metric histories by training
step), its provenance and identity as tags. Every value comes from the row after
:func:`harness.results.redact.scrub_row`: nothing the harness masks anywhere else reaches the tracker.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import pandas as pd

from harness.contract.axes import Status
from harness.results import redact

TAG_PREFIX = "rosetta."
RUN_ID_TAG = "rosetta.run_id"  # the row's run id: what makes an export idempotent
SWEEP_TAG = "rosetta.sweep_id"
KIND_TAG = "rosetta.kind"  # "sweep" (the parent run holding the sweep's charts) | "row"
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: the UI nests a row's run under its sweep's
EXPERIMENT_PREFIX = "rosetta/"  # one experiment per scenario: rosetta/<scenario>

# The row's dimensions: what was asked for (parameters, as a sweep's hyperparameters are).
DIMENSIONS = ("framework", "workload", "size", "nodes", "procs_per_node", "world_size", "batch_per_worker",
              "global_batch", "strategy", "strategy_options", "storage", "launcher", "network", "precision",
              "memory_format", "compile", "device_requested", "device", "repeat", "warmup_steps",
              "measured_steps", "accelerator", "emulated_step", "checkpoint_mode")
# Where, with what and by which code it ran: tags (searchable, not plotted).
PROVENANCE = ("scenario", "config_id", "status", "reason", "sample_unit", "layout", "hosts", "image", "image_id",
              "image_digest", "framework_version", "versions", "host", "os", "cpu_model", "cpu_cores", "gpu_model",
              "gpu_count", "gpu_driver", "mpi", "harness_version", "harness_commit", "timestamp", "run_dir",
              "strategy_note", "compute_source", "checkpoint_cache_defeat", "weights_checksum")
# and every true/false column (weights_consistent, au_ok, ...): tags too
# Numeric columns that are neither measurements nor dimensions.
NOT_METRICS = frozenset({"schema_version"})
MAX_TAG_CHARS = 8000  # MLflow's limit on a tag's value
MAX_PARAM_CHARS = 6000  # and on a parameter's

# A row's status as the run's end state in MLflow.
END_STATES = {Status.OK.value: "FINISHED", Status.SKIPPED.value: "KILLED"}  # any other: FAILED


@dataclass(frozen=True)
class RunContent:
    """One row as an MLflow run: name, parameters, single metrics, metric histories (name -> [(step,
    value)]), tags, the end state and the times (ms since the epoch)."""

    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    histories: dict[str, list[tuple[int, float]]]
    tags: dict[str, str]
    end_state: str
    time_ms: int
    row_json: str = ""
    step_times_s: list[float] = field(default_factory=list)


def present(value: Any) -> bool:
    """Whether a table cell holds a value (not None, NaN or pandas' NA)."""
    if value is None:
        return False
    try:
        return not bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or a dict: a value
        return True


def plain(value: Any) -> Any:
    """A cell as JSON-able data (NumPy and pandas scalars as Python's; missing as None)."""
    if not present(value):
        return None
    return value.item() if hasattr(value, "item") else value


def run_name(row: Mapping[str, Any]) -> str:
    """e.g. ``torch_ddp resnet50/tiny 1x2 allreduce r0``: what the MLflow run list shows."""
    return (f"{row.get('framework')} {row.get('workload')}/{row.get('size')} "
            f"{row.get('nodes')}x{row.get('procs_per_node')} {row.get('strategy')} r{row.get('repeat')}")


def timestamp_ms(row: Mapping[str, Any]) -> int:
    """When the run finished (the row's UTC timestamp), in milliseconds since the epoch."""
    stamp = plain(row.get("timestamp"))
    return int(pd.Timestamp(stamp).timestamp() * 1000) if stamp else 0


def measurements(row: Mapping[str, Any], numeric: set[str]) -> dict[str, float]:
    """Every numeric measurement of the row (samples/s, seconds, fractions, bytes, as named by the table)."""
    skip = set(DIMENSIONS) | set(PROVENANCE) | NOT_METRICS
    out = {}
    for name in numeric - skip:
        value = plain(row.get(name))
        if value is not None and not isinstance(value, bool) and math.isfinite(float(value)):
            out[name] = float(value)
    return out


def histories(row: Mapping[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Per-step series by training step: ``step_time_s`` (the slowest rank's time of each measured step,
    numbered after the warm-up steps), ``heldout_accuracy`` and ``heldout_loss`` (time-to-accuracy runs)."""
    out: dict[str, list[tuple[int, float]]] = {}
    steps = plain(row.get("step_times_s"))
    if steps:
        first = int(plain(row.get("warmup_steps")) or 0)
        out["step_time_s"] = [(first + i, float(t)) for i, t in enumerate(json.loads(steps))]
    curve = plain(row.get("accuracy_curve"))
    if curve:
        points = json.loads(curve)
        out["heldout_accuracy"] = [(int(step), float(acc)) for step, acc, *_ in points]
        out["heldout_loss"] = [(int(p[0]), float(p[2])) for p in points if len(p) > 2 and p[2] is not None]
    return out


def tags(row: Mapping[str, Any]) -> dict[str, str]:
    """Identity and provenance as tags; MLflow's own for the source commit."""
    out = {RUN_ID_TAG: str(row["run_id"]), SWEEP_TAG: str(row.get("sweep_id")), KIND_TAG: "row"}
    flags = [name for name, value in row.items() if isinstance(plain(value), bool)]  # verdicts: searchable
    for name in (*PROVENANCE, *flags):
        value = plain(row.get(name))
        if value is not None:
            out[TAG_PREFIX + name] = str(value)[:MAX_TAG_CHARS]
    commit = plain(row.get("harness_commit"))
    if commit:
        out["mlflow.source.git.commit"] = str(commit).removesuffix("-dirty")
    out["mlflow.source.name"] = "rosetta"
    return out


def content(row: Mapping[str, Any], numeric: set[str], efficiency: float | None = None) -> RunContent:
    """The MLflow run of one result row, from its redacted copy. ``numeric``: the table's numeric columns;
    ``efficiency``: the row's scaling efficiency (throughput / linear scaling of its series' baseline,
    as ``rosetta report`` computes it), where known."""
    clean = redact.scrub_row({k: plain(v) for k, v in row.items()})
    params = {name: str(clean[name])[:MAX_PARAM_CHARS] for name in DIMENSIONS if present(clean.get(name))}
    metrics = measurements(clean, numeric)
    if efficiency is not None and math.isfinite(efficiency):
        metrics["efficiency"] = efficiency
    history = histories(clean)
    return RunContent(name=run_name(clean), params=params, metrics=metrics, histories=history, tags=tags(clean),
                      end_state=END_STATES.get(str(clean.get("status")), "FAILED"), time_ms=timestamp_ms(clean),
                      row_json=json.dumps(clean, indent=1, sort_keys=True, default=str),
                      step_times_s=[v for _, v in history.get("step_time_s", [])])


def experiment_name(scenario: str) -> str:
    return EXPERIMENT_PREFIX + scenario
