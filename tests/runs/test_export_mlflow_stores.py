"""``rosetta export mlflow`` into stores without a server (issue 52): a ``file:`` URI (MLflow 3 refuses its file
store unless asked) and a scenario whose name has an apostrophe (the file store quotes an experiment's name
into a filter unescaped; a database store takes any name). Both were a traceback with exit 1. MLflow starts
processes of its own (uname), so this is not a unit test; about 15 s."""

from __future__ import annotations

import random

import pytest

from harness.cli import main as cli
from harness.results import table as results
from tests.helpers.history_rows import sweep_rows
from tests.helpers.rows import result_row

pytest.importorskip("mlflow", reason="MLflow is not installed (pip install -e '.[engines]')")


def _store_of(folder, scenario_name: str) -> None:
    rng = random.Random(2)
    results.append(folder, [{**result_row(), **r, "scenario": scenario_name} for r in sweep_rows(0, 0.08, rng)])


def test_export_mlflow_to_a_file_uri_and_a_quoted_name(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    _store_of(tmp_path / "plain", "quick")
    _store_of(tmp_path / "quoted", "it's")
    files = (tmp_path / "mlruns").as_uri()
    assert cli.main(["export", "mlflow", "--results", str(tmp_path / "plain"), "--tracking-uri", files]) == 0
    assert "3 rows logged" in capsys.readouterr().out
    assert cli.main(["export", "mlflow", "--results", str(tmp_path / "quoted"), "--tracking-uri", files]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "sqlite:///" in err and "Traceback" not in err
    database = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert cli.main(["export", "mlflow", "--results", str(tmp_path / "quoted"), "--tracking-uri", database]) == 0
    assert "experiment: rosetta/it's" in capsys.readouterr().out
    assert cli.main(["export", "mlflow", "--results", str(tmp_path / "quoted"), "--tracking-uri", database]) == 0
    assert "0 rows logged, 3 already there" in capsys.readouterr().out  # found again by its quoted name
