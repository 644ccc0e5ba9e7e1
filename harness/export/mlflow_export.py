"""``rosetta export mlflow``: every row of a results table as an MLflow run, once.

An experiment per scenario (``rosetta/<scenario>``); in it, a parent run per sweep holding the sweep's
charts (the report's), and under it a run per row (:mod:`harness.export.mlflow_rows`: parameters,
metrics, histories, tags; the row's JSON and its step-time chart as artifacts). A row's run carries the
row's run id as the tag ``rosetta.run_id``: a row whose run is already there is not logged again, so a
second export adds nothing. A run is ended (FINISHED, FAILED, KILLED) only once all of it is logged; a
run an interrupted export left unended is deleted and logged anew.

MLflow is imported here, inside functions only (the ``engines`` extra); its client reads the server's
credentials from MLflow's own variables (MLFLOW_TRACKING_TOKEN, ...), which Rosetta never records.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from harness.base.errors import UserError
from harness.export import mlflow_rows as rows_map
from harness.reports import aggregate
from harness.results import metrics as stats, redact, table as results

TRACKING_VARIABLE = "MLFLOW_TRACKING_URI"  # MLflow's own
METRICS_PER_CALL = 1000  # MLflow's limit on one log_batch


@dataclass(frozen=True)
class ExportSummary:
    """What one export did: rows logged now, rows already there, incomplete runs logged again, and the
    experiments it wrote to."""

    logged: int
    already: int
    redone: int
    experiments: tuple[str, ...]


def tracking_uri(given: str | None) -> str:
    """The server to export to: ``--tracking-uri``, else MLFLOW_TRACKING_URI; a UserError without either."""
    uri = given or os.environ.get(TRACKING_VARIABLE, "")
    if not uri:
        raise UserError(f"export mlflow: no tracking server: give --tracking-uri URI or set {TRACKING_VARIABLE}")
    return uri


def client_for(uri: str) -> Any:
    """An MlflowClient for ``uri``, its server answering; a UserError naming what is missing otherwise."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise UserError(f"export mlflow: MLflow is not installed ({exc}); pip install -e '.[engines]'") from exc
    # MLflow's client prints a link per ended run (with the server's address, credentials and all) and
    # sends usage data home unless told not to; the user's own setting of either wins.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if uri.startswith("file:") or "://" not in uri:  # a folder: MLflow 3 keeps its file store only when asked
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    try:  # the client opens its store at once: a refused or malformed URI raises here, not at the first call
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - MLflow raises several kinds; each is one line for the user
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"export mlflow: tracking server {redact.scrub(uri)} does not answer: "
                        f"{redact.scrub(first)[:300]}") from exc
    return client


def row_efficiencies(table: pd.DataFrame) -> dict[str, float]:
    """Each row's scaling efficiency (run id -> throughput / linear scaling of its series' baseline), the
    baseline as ``rosetta report`` takes it (:func:`harness.reports.aggregate.baseline`)."""
    if table.empty:
        return {}
    table = table.assign(device=table["device"].fillna(table["device_requested"]))
    summary = aggregate.summarize(table)

    def key(row: pd.Series) -> tuple:
        return tuple(str(row[k]) if rows_map.present(row[k]) else None for k in aggregate.SERIES_KEYS)

    bases = {}
    for _, series in summary.groupby(aggregate.SERIES_KEYS, dropna=False):
        measured = series[series["throughput_median"].notna()]
        if not measured.empty:
            base = measured.loc[measured["world_size"].idxmin()]
            bases[key(base)] = (aggregate.baseline(base)[0], int(base["world_size"]))
    out = {}
    for _, row in table.iterrows():
        base = bases.get(key(row))
        if base and rows_map.present(row["throughput"]):
            out[str(row["run_id"])] = stats.scaling_efficiency(float(row["throughput"]), int(row["world_size"]),
                                                               *base)
    return out


def experiment_id(client: Any, scenario: str) -> str:
    """The scenario's experiment, made on first use (a deleted one is restored: its name stays taken)."""
    name = rows_map.experiment_name(scenario)
    found = _experiment_named(client, name)
    if found is None:
        try:
            return client.create_experiment(name, tags={"mlflow.note.content": f"Rosetta scenario {scenario}"})
        except Exception as exc:  # noqa: BLE001 - MlflowException, whose module is imported only with MLflow
            if "'" not in name:
                raise
            raise UserError(f"export mlflow: this tracking store cannot make an experiment named {name!r} (MLflow's "
                            f"file store quotes the name into a filter unescaped); export to a database store "
                            f"(--tracking-uri sqlite:///mlflow.db) or name the scenario without \"'\"") from exc
    if found.lifecycle_stage == "deleted":
        client.restore_experiment(found.experiment_id)
    return found.experiment_id


def _experiment_named(client: Any, name: str) -> Any:
    """The experiment called ``name``, deleted ones included, or None. Compared here, not in a filter string:
    MLflow's file store quotes the name into one unescaped, so that a scenario named "it's" was a traceback."""
    from mlflow.entities import ViewType

    token = None
    while True:
        page = client.search_experiments(view_type=ViewType.ALL, max_results=1000, page_token=token)
        found = next((e for e in page if e.name == name), None)
        if found is not None or not page.token:
            return found
        token = page.token


def existing_runs(client: Any, experiment: str) -> dict[str, Any]:
    """Runs of the experiment Rosetta logged, by their ``rosetta.run_id`` or ``sweep:<id>`` for a sweep's."""
    found, token = {}, None
    while True:
        page = client.search_runs([experiment], filter_string=f"tags.`{rows_map.KIND_TAG}` != ''",
                                  max_results=1000, page_token=token)
        for run in page:
            tags = run.data.tags
            key = tags.get(rows_map.RUN_ID_TAG) or f"sweep:{tags.get(rows_map.SWEEP_TAG)}"
            found[key] = run
        token = page.token
        if not token:
            return found


def log_content(client: Any, run_id: str, content: rows_map.RunContent, folder: Path) -> None:
    """Parameters, metrics, histories and tags in batches MLflow accepts; then the artifacts."""
    from mlflow.entities import Metric, Param, RunTag

    stamp = content.time_ms
    metrics = [Metric(k, v, stamp, 0) for k, v in content.metrics.items()]
    metrics += [Metric(k, v, stamp, step) for k, points in content.histories.items() for step, v in points]
    params = [Param(k, v) for k, v in content.params.items()]
    tags = [RunTag(k, v) for k, v in content.tags.items() if k != rows_map.RUN_ID_TAG]
    client.log_batch(run_id, params=params, tags=tags[:100])
    for start in range(100, len(tags), 100):
        client.log_batch(run_id, tags=tags[start:start + 100])
    for start in range(0, len(metrics), METRICS_PER_CALL):
        client.log_batch(run_id, metrics=metrics[start:start + METRICS_PER_CALL])
    (folder / "row.json").write_text(content.row_json)
    client.log_artifact(run_id, str(folder / "row.json"))
    if content.step_times_s:
        client.log_artifact(run_id, str(step_time_chart(content, folder / "step_times.png")))


def step_time_chart(content: rows_map.RunContent, path: Path) -> Path:
    """The row's per-step times (ms) against the training step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.reports.charts import save_figure

    steps, times = zip(*content.histories["step_time_s"])
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(steps, [t * 1000 for t in times], marker="o", markersize=3)
    ax.set_xlabel("training step")
    ax.set_ylabel("step time (ms), slowest rank")
    ax.set_title(content.name, fontsize=9)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def sweep_charts(table: pd.DataFrame, folder: Path) -> list[Path]:
    """The charts ``rosetta report`` writes for a sweep (throughput and efficiency, frameworks, strategies,
    step-time distributions, telemetry), made into ``folder``."""
    from harness.reports import charts, terminal

    summary = aggregate.summarize(table)
    paths = [charts.plot(summary, folder / "report.png"), charts.plot_step_times(table, folder / "step_times.png")]
    if terminal.compares_frameworks(summary):
        paths.append(charts.plot_bars(summary, folder / "frameworks.png"))
    if aggregate.compares_strategies(summary):
        paths.append(charts.plot_strategies(summary, folder / "strategies.png"))
    telemetry = charts.plot_telemetry(table, folder / "telemetry.png")
    return paths + ([telemetry] if telemetry else [])


def identity_tags(tags: dict[str, str]) -> dict[str, str]:
    """The tags a run is made with (what finds it again): the rest is logged after."""
    names = (rows_map.RUN_ID_TAG, rows_map.SWEEP_TAG, rows_map.KIND_TAG, rows_map.PARENT_TAG)
    return {k: v for k, v in tags.items() if k in names}


def sweep_run(client: Any, experiment: str, sweep: str, table: pd.DataFrame, known: dict[str, Any],
              changed: bool) -> str:
    """The sweep's parent run id: made with the sweep's charts on first export, its charts made again
    when rows were added to it since (a resumed sweep)."""
    existing = known.get(f"sweep:{sweep}")
    if existing is not None and not changed:
        return existing.info.run_id
    if existing is None:
        start = min((rows_map.timestamp_ms(r) for r in table.to_dict("records")), default=0)
        scenario = str(table["scenario"].iloc[0])
        run = client.create_run(experiment, start_time=start or None, run_name=f"sweep {sweep}",
                                tags={rows_map.SWEEP_TAG: sweep, rows_map.KIND_TAG: "sweep",
                                      "rosetta.scenario": scenario, "mlflow.source.name": "rosetta"})
        run_id = run.info.run_id
    else:
        run_id = existing.info.run_id
    with tempfile.TemporaryDirectory(prefix="rosetta-mlflow-") as folder:
        for chart in sweep_charts(table, Path(folder)):
            client.log_artifact(run_id, str(chart), artifact_path="charts")
    end = max((rows_map.timestamp_ms(r) for r in table.to_dict("records")), default=0)
    client.set_terminated(run_id, "FINISHED", end_time=end or None)
    return run_id


def export_sweep(client: Any, sweep: str, table: pd.DataFrame, numeric: set[str]) -> tuple[int, int, int, str]:
    """Log the rows of one sweep not logged yet; (logged, already there, redone, experiment name)."""
    scenario = str(table["scenario"].iloc[0])
    experiment = experiment_id(client, scenario)
    known = existing_runs(client, experiment)
    efficiencies = row_efficiencies(table)
    records = table.to_dict("records")
    # a run made but never ended: an export stopped half way; it is logged again from the start
    unfinished = [r for r in records if (run := known.get(str(r["run_id"]))) is not None
                  and run.info.status == "RUNNING"]
    for record in unfinished:
        client.delete_run(known.pop(str(record["run_id"])).info.run_id)
    todo = [r for r in records if str(r["run_id"]) not in known]
    parent = sweep_run(client, experiment, sweep, table, known, changed=bool(todo))
    for record in todo:
        content = rows_map.content(record, numeric, efficiencies.get(str(record["run_id"])))
        tags = identity_tags({**content.tags, rows_map.PARENT_TAG: parent})
        run = client.create_run(experiment, start_time=content.time_ms or None, tags=tags, run_name=content.name)
        with tempfile.TemporaryDirectory(prefix="rosetta-mlflow-") as folder:
            log_content(client, run.info.run_id, content, Path(folder))
        client.set_terminated(run.info.run_id, content.end_state, end_time=content.time_ms or None)
    return len(todo), len(records) - len(todo), len(unfinished), rows_map.experiment_name(scenario)


def export(results_dir: Path, uri: str | None, sweep: str | None = "all") -> ExportSummary:
    """Export the rows of ``sweep`` (an id, ``all``, or None: the latest) of ``results_dir`` to the
    MLflow server at ``uri`` (None: MLFLOW_TRACKING_URI)."""
    table, _ = aggregate.select_sweep(results_dir, sweep)  # every attempt of a repeat is a row, and a run
    client = client_for(tracking_uri(uri))
    numeric = {name for name, dtype in results.COLUMNS.items() if dtype in ("Float64", "Int64")}
    logged = already = redone = 0
    experiments = []
    for sweep_id, rows in table.groupby("sweep_id", sort=True):
        n, old, again, name = export_sweep(client, str(sweep_id), rows, numeric)
        logged, already, redone = logged + n, already + old, redone + again
        experiments.append(name)
    return ExportSummary(logged, already, redone, tuple(dict.fromkeys(experiments)))


def describe(summary: ExportSummary, uri: str) -> Iterable[str]:
    """The lines ``rosetta export mlflow`` prints."""
    yield (f"mlflow: {summary.logged} rows logged, {summary.already} already there"
           + (f", {summary.redone} left incomplete by an earlier export logged again" if summary.redone else "")
           + f" ({redact.scrub(uri)})")
    for name in summary.experiments:
        yield f"experiment: {name}"
