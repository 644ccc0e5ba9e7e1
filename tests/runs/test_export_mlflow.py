"""``rosetta export mlflow`` against a real MLflow tracking server (sqlite store, artifacts in a folder,
127.0.0.1, a free port) that this module starts and stops, read back through MLflow's own client: the rows
of real sweeps, every one a run with its dimensions, measurements, step-time history, provenance and
artifacts; a second export adds nothing; what a secret-named variable holds reaches no run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.base.network import free_port
from harness.cli import main as cli
from harness.export import mlflow_rows
from harness.results import table as results
from tests.conftest import TINY
from tests.helpers.servers import stop

mlflow = pytest.importorskip("mlflow", reason="MLflow not installed (pip install -e '.[engines]')")
pytest.importorskip("torch")

QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
START_S = 240  # the server's start (its database made, its app imported): 40 s on a loaded 2-core machine
SKIPS = """
name = "skips"
[settings]
device = "cpu"
repeats = 2
[matrix]
framework = "chainer"
workload = "bert"
size = "tiny"
"""


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``mlflow server`` on 127.0.0.1 with a sqlite store and an artifact folder; its URI. Stopped after
    (its process group: the server and the workers it starts)."""
    folder = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    argv = [str(mlflow_cli), "server", "--backend-store-uri", f"sqlite:///{folder}/mlflow.db",
            "--artifacts-destination", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
            "--workers", "1"]
    with open(folder / "server.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **QUIET})
    try:
        deadline = time.monotonic() + START_S
        while not _healthy(uri):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"mlflow server did not start: {(folder / 'server.log').read_text()[-400:]}")
            time.sleep(0.5)
        yield uri
    finally:
        stop(proc)  # the group this fixture started, by its leader's id


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """A results folder with two real sweeps: torch_ddp on 1 and 2 processes (ok), chainer BERT (skipped)."""
    folder = tmp_path_factory.mktemp("sweeps")
    for name, text in (("tiny.toml", TINY), ("skips.toml", SKIPS)):
        (folder / name).write_text(text)
        cli.main(["run", str(folder / name), "--results", str(folder / "results"), "--allow-failures"])
    table = results.load(folder / "results")
    assert sorted(table["status"]) == ["ok", "ok", "skipped", "skipped"]
    return folder / "results"


@pytest.fixture
def client(server, monkeypatch):
    for name, value in QUIET.items():
        monkeypatch.setenv(name, value)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=server)


def rosetta_runs(client, scenario: str) -> list:
    experiment = client.get_experiment_by_name(mlflow_rows.experiment_name(scenario))
    return [] if experiment is None else client.search_runs([experiment.experiment_id], max_results=1000)


def test_every_row_becomes_a_run_and_a_second_export_adds_none(server, sweeps, client, capsys):
    assert cli.main(["export", "mlflow", "--tracking-uri", server, "--results", str(sweeps)]) == 0
    assert "mlflow: 4 rows logged, 0 already there" in capsys.readouterr().out
    table = results.load(sweeps)
    runs = {s: rosetta_runs(client, s) for s in ("tiny", "skips")}
    rows = {r.data.tags.get(mlflow_rows.RUN_ID_TAG): r for rs in runs.values() for r in rs
            if r.data.tags[mlflow_rows.KIND_TAG] == "row"}
    assert set(rows) == set(table["run_id"])
    parents = {r.info.run_id for rs in runs.values() for r in rs if r.data.tags[mlflow_rows.KIND_TAG] == "sweep"}
    assert len(parents) == 2 and {r.data.tags[mlflow_rows.PARENT_TAG] for r in rows.values()} == parents

    for row in table.to_dict("records"):
        run = rows[row["run_id"]]
        assert run.data.params["framework"] == row["framework"]
        assert run.data.params["world_size"] == str(row["world_size"])
        assert run.data.tags["rosetta.status"] == row["status"]
        assert run.data.tags["rosetta.harness_commit"] == row["harness_commit"]
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        kept = json.loads(Path(client.download_artifacts(run.info.run_id, "row.json")).read_text())
        assert kept["run_id"] == row["run_id"] and kept["status"] == row["status"]
        if row["status"] == "ok":
            assert run.info.status == "FINISHED" and artifacts == {"row.json", "step_times.png"}
            assert run.data.metrics["throughput"] == pytest.approx(row["throughput"])
            history = client.get_metric_history(run.info.run_id, "step_time_s")
            steps = json.loads(row["step_times_s"])
            assert [(m.step, m.value) for m in history] == [
                (row["warmup_steps"] + i, pytest.approx(t)) for i, t in enumerate(steps)]
            assert run.data.metrics["efficiency"] > 0
            assert run.data.tags["rosetta.weights_consistent"] == "True"  # a true/false column: a tag
            if mlflow_rows.present(row.get("mfu")):  # MFU where the row has it
                assert run.data.metrics["mfu"] == pytest.approx(row["mfu"])
        else:
            assert run.info.status == "KILLED" and artifacts == {"row.json"}
            assert "chainer has no bert model" in run.data.tags["rosetta.reason"]
    charts = {a.path for p in parents for a in client.list_artifacts(p, "charts")}
    assert "charts/report.png" in charts and "charts/step_times.png" in charts

    assert cli.main(["export", "mlflow", "--tracking-uri", server, "--results", str(sweeps)]) == 0
    assert "mlflow: 0 rows logged, 4 already there" in capsys.readouterr().out
    assert sum(len(rosetta_runs(client, s)) for s in ("tiny", "skips")) == 6  # 4 rows, 2 sweeps: as before


def test_a_run_an_interrupted_export_left_open_is_logged_again(server, sweeps, client, capsys):
    table = results.load(sweeps)
    row = table[table["status"] == "skipped"].iloc[0]
    cli.main(["export", "mlflow", "--tracking-uri", server, "--results", str(sweeps)])
    (done,) = [r for r in rosetta_runs(client, "skips") if r.data.tags.get(mlflow_rows.RUN_ID_TAG) == row["run_id"]]
    client.delete_run(done.info.run_id)  # as an export stopped half way leaves it: made, tagged, never ended
    experiment = client.get_experiment_by_name("rosetta/skips").experiment_id
    client.create_run(experiment, tags={mlflow_rows.RUN_ID_TAG: row["run_id"], mlflow_rows.KIND_TAG: "row"})
    capsys.readouterr()
    assert cli.main(["export", "mlflow", "--tracking-uri", server, "--results", str(sweeps)]) == 0
    assert "1 rows logged, 3 already there, 1 left incomplete" in capsys.readouterr().out
    again = [r for r in rosetta_runs(client, "skips") if r.data.tags.get(mlflow_rows.RUN_ID_TAG) == row["run_id"]]
    assert [r.info.status for r in again] == ["KILLED"] and again[0].data.params["framework"] == "chainer"


def test_a_secret_held_in_the_environment_reaches_no_run(server, sweeps, client, monkeypatch, tmp_path, capsys):
    """The export masks as every other output does: a value a secret-named variable holds (here the CPU's
    name, which every row carries) is masked in tags and in the row's JSON."""
    secret = results.load(sweeps)["cpu_model"].iloc[0]
    monkeypatch.setenv("ROSETTA_TEST_TOKEN", secret)
    copy = tmp_path / "results"
    table = results.load(sweeps)
    table["scenario"] = "secret"  # an experiment of its own, so that every row is logged now
    results.append(copy, table.to_dict("records"))
    assert cli.main(["export", "mlflow", "--tracking-uri", server, "--results", str(copy)]) == 0
    for run in rosetta_runs(client, "secret"):
        assert secret not in json.dumps(run.data.tags) + json.dumps(run.data.params)
        if run.data.tags[mlflow_rows.KIND_TAG] == "row":
            assert run.data.tags["rosetta.cpu_model"] == "***"
            assert secret not in Path(client.download_artifacts(run.info.run_id, "row.json")).read_text()


def test_run_exports_its_sweep_when_asked(server, client, write_scenario, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server)
    path = write_scenario(SKIPS.replace('name = "skips"', 'name = "run-export"'))
    assert cli.main(["run", str(path), "--results", str(tmp_path / "r"), "--export", "mlflow"]) == 0
    assert "mlflow: 2 rows logged" in capsys.readouterr().out
    assert len([r for r in rosetta_runs(client, "run-export") if r.data.tags[mlflow_rows.KIND_TAG] == "row"]) == 2


def test_no_or_no_answering_server_is_a_one_line_error(sweeps, monkeypatch, capsys):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert cli.main(["export", "mlflow", "--results", str(sweeps)]) == 2
    assert capsys.readouterr().err.strip() == ("rosetta: error: export mlflow: no tracking server: give "
                                               "--tracking-uri URI or set MLFLOW_TRACKING_URI")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own retries would take minutes
    closed = f"http://user:hunter2secret@127.0.0.1:{free_port()}"
    assert cli.main(["export", "mlflow", "--tracking-uri", closed, "--results", str(sweeps)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rosetta: error: export mlflow: tracking server http://user:***@127.0.0.1:")
    assert "hunter2secret" not in err and len(err.splitlines()) == 1
