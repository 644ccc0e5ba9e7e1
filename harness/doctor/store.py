"""The doctor's store: every check's measurements and verdicts as rows of ``doctor.parquet`` (and
``doctor.csv``) in the results folder, a schema version on every row, and the baselines later checks of the
same machine type are judged against (the figures of earlier checks that were judged healthy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from harness.doctor.judge import UNITS, Probe, Verdict
from harness.results import provenance, table as results

DOCTOR_SCHEMA_VERSION = 1

DOCTOR_COLUMNS: dict[str, str] = {
    "schema_version": "Int64",
    "check_id": "string",  # one doctor run: its UTC start, compact
    "machine_type": "string",  # what the hosts are, as given or derived (emulated: accelerator over link)
    "probe": "string",  # harness.doctor.judge.Probe
    "subject": "string",  # a host, a GPU (host/gpuN) or hosts joined by "+"
    "value": "Float64",  # in unit
    "unit": "string",  # GB/s (bus bandwidth, nccl-tests' convention) | us | s
    "detail": "string",  # how it was measured
    "reference": "string",  # baseline | median | none
    "expected": "Float64",  # the reference's figure, in unit
    "slowdown": "Float64",  # times worse than expected
    "tolerance": "Float64",  # bad beyond 1 + this
    "bad": "boolean",
    "dilation": "Float64",  # emulated: the time dilation the figures were undilated by (1: none)
    "host": "string",  # the machine the doctor ran on
    "harness_commit": "string",
    "timestamp": "string",  # UTC, ISO 8601
}

PARQUET = "doctor.parquet"
CSV = "doctor.csv"
FORMAT = results.TableFormat("doctor", DOCTOR_COLUMNS, DOCTOR_SCHEMA_VERSION, PARQUET, CSV)


def rows(check_id: str, machine_type: str, verdicts: Iterable[Verdict], dilation: float,
         facts: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per verdict; ``facts``: this machine's (host, harness_commit), provenance's where not given."""
    facts = facts or provenance.machine()
    return [{"schema_version": DOCTOR_SCHEMA_VERSION, "check_id": check_id, "machine_type": machine_type,
             "probe": v.measurement.probe.value, "subject": v.measurement.subject, "value": v.measurement.value,
             "unit": UNITS[v.measurement.probe], "detail": v.measurement.detail, "reference": v.reference.value,
             "expected": v.expected, "slowdown": v.slowdown, "tolerance": v.tolerance, "bad": v.bad,
             "dilation": dilation, "host": facts["host"], "harness_commit": facts["harness_commit"],
             "timestamp": provenance.utc_now()} for v in verdicts]


def load(results_dir: Path) -> pd.DataFrame:
    return results.load_table(FORMAT, results_dir)


def append(results_dir: Path, new: Iterable[dict[str, Any]]) -> pd.DataFrame:
    return results.append_table(FORMAT, results_dir, new)


def baselines(table: pd.DataFrame, machine_type: str) -> dict[Probe, list[float]]:
    """Per probe, the figures earlier checks of ``machine_type`` judged healthy (bad ones are no baseline)."""
    if table.empty:
        return {}
    same = table[(table["machine_type"] == machine_type) & ~table["bad"].fillna(False).astype(bool)]
    return {Probe(probe): [float(x) for x in group["value"].dropna()] for probe, group in same.groupby("probe")}
