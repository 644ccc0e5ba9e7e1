"""Run a sweep: every expanded run in its own launch, one row each, appended as it ends."""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any, Protocol

import frameworks
from harness import collect, execute, launchers, provenance, results
from harness.axes import Status
from harness.events import latest_step, read_rank
from harness.launchers import LaunchRequest
from harness.matrix import expand
from harness.scenario import Scenario
from harness.spec import RunSpec, write_spec_file
from harness.workloads import WORKLOADS


class Observer(Protocol):
    """Receives progress while a sweep runs (the CLI draws it; tests may pass None)."""

    def run_started(self, index: int, total: int, spec: RunSpec) -> None: ...
    def step(self, spec: RunSpec, event: dict[str, Any]) -> None: ...
    def run_finished(self, row: dict[str, Any]) -> None: ...


def new_sweep_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def run_sweep(scenario: Scenario, results_dir: Path, observer: Observer | None = None) -> list[dict[str, Any]]:
    """Run every run of ``scenario``; each row is appended to the table as soon as its run ends.

    A KeyboardInterrupt stops the sweep after recording the current run as ``interrupted``.
    """
    sweep_id = new_sweep_id()
    specs = expand(scenario)
    sweep_dir = Path(results_dir) / "runs" / sweep_id
    rows = []
    for index, spec in enumerate(specs):
        if observer:
            observer.run_started(index, len(specs), spec)
        run_dir = sweep_dir / f"{index:04d}"
        try:
            row = run_one(spec, run_dir, sweep_id, observer)
        except KeyboardInterrupt:
            row = _row(spec, run_dir, sweep_id, Status.INTERRUPTED, "interrupted by the user (Ctrl-C)")
            _record(results_dir, run_dir, row, observer)
            rows.append(row)
            raise
        _record(results_dir, run_dir, row, observer)
        rows.append(row)
    return rows


def _record(results_dir: Path, run_dir: Path, row: dict[str, Any], observer: Observer | None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    results.write_row_json(run_dir / "row.json", row)
    results.append(results_dir, [row])
    if observer:
        observer.run_finished(row)


def skip_reason(spec: RunSpec) -> str | None:
    """Why ``spec`` cannot run here (unsupported combination or missing package), or None."""
    info = frameworks.get(spec.framework)
    missing = info.missing_modules(spec.workload)
    return (info.unsupported_reason(spec.workload, spec.strategy, spec.storage, spec.device)
            or launchers.unsupported_reason(info.launcher, spec)
            or (f"not installed: {', '.join(missing)} (install the {spec.framework} extra)" if missing else None))


def run_one(spec: RunSpec, run_dir: Path, sweep_id: str, observer: Observer | None = None) -> dict[str, Any]:
    """Launch one run and turn what it left into a row (never raises for a failed run)."""
    info = frameworks.get(spec.framework)
    reason = skip_reason(spec)
    if reason:
        return _row(spec, run_dir, sweep_id, Status.SKIPPED, reason, launcher=info.launcher)
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_file = run_dir / "spec.json"
    write_spec_file(spec_file, spec, run_dir)
    request = LaunchRequest(spec=spec, worker_module=info.worker_module, spec_file=spec_file,
                            python=sys.executable, cpu_count=os.cpu_count() or 1)
    command = launchers.get(info.launcher)(request)
    (run_dir / "command.json").write_text(json.dumps({"argv": command.argv, "env": dict(command.env)}, indent=2))

    def tick() -> None:
        event = latest_step(run_dir, 0)
        if observer and event:
            observer.step(spec, event)

    outcome = execute.run(command, cwd=provenance.REPO_ROOT, log_path=run_dir / "launcher.log",
                          timeout_s=spec.timeout_s, on_tick=tick)
    ranks = [read_rank(run_dir, rank) for rank in range(spec.world_size)]
    status, reason = collect.status_and_reason(spec, outcome, ranks, run_dir)
    fields = collect.worker_facts(ranks, info.requires[0])
    if status == Status.OK:
        fields.update(collect.measurement_fields(ranks))
    if status in (Status.OK, Status.DIVERGED):  # a diverged run still shows how far it got
        fields.update(collect.accuracy_fields(ranks, spec.workload_options.get("target_accuracy")))
    return _row(spec, run_dir, sweep_id, status, reason, launcher=info.launcher, launch_s=outcome.seconds,
                **fields)


def _row(spec: RunSpec, run_dir: Path, sweep_id: str, status: Status, reason: str | None,
         **fields: Any) -> dict[str, Any]:
    return {
        "schema_version": results.SCHEMA_VERSION,
        "sweep_id": sweep_id,
        "run_id": f"{sweep_id}/{run_dir.name}",
        "config_id": spec.config_id(),
        **spec.dimensions(),
        "repeat": spec.repeat,
        "status": status.value,
        "reason": reason,
        "sample_unit": WORKLOADS[spec.workload].sample_unit,
        "timestamp": provenance.utc_now(),
        "spec": json.dumps(spec.to_json(), sort_keys=True),
        "strategy_options": json.dumps(dict(spec.strategy_options), sort_keys=True),
        "run_dir": str(run_dir),
        **provenance.machine(),
        **fields,
    }
