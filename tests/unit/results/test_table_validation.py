"""A malformed results table is exit 2 with one line in every verb alike (issue 52). Before the table's
required, filled and closed columns were checked at read: compare reported every configuration failed and
exited 1 on a table without a status column or with an integer one, printed an internal TypeError for one
without sweep or config ids while report, history and dashboard accepted it, and a table without
throughput showed "ok" in the samples/s column (every case below but the benign one failed)."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from harness.cli import main as cli
from harness.results import table as results
from tests.helpers.history_rows import sweep_rows
from tests.helpers.rows import result_row

BROKEN = {
    "no status column": lambda t: t.drop(columns=["status"]),
    "an integer status": lambda t: t.assign(status=1),
    "no sweep_id column": lambda t: t.drop(columns=["sweep_id"]),
    "no config_id column": lambda t: t.drop(columns=["config_id"]),
    "an empty sweep_id": lambda t: t.assign(sweep_id=t["sweep_id"].where(t.index != 3, None)),
    "no throughput column": lambda t: t.drop(columns=["throughput"]),
}
WANT = {"no status column": "no status column", "an integer status": "status '1' is not one of ok",
        "no sweep_id column": "no sweep_id column", "no config_id column": "no config_id column",
        "an empty sweep_id": "row 3: sweep_id is empty", "no throughput column": "no throughput column"}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = random.Random(5)
    return results.to_frame([{**result_row(), **r} for i in range(4) for r in sweep_rows(i, 0.08, rng)])


def _verbs(good, bad, tmp_path):
    return {"compare": ["compare", str(good), str(bad)], "report": ["report", "--results", str(bad)],
            "history": ["history", str(bad), "--no-chart"],
            "dashboard": ["dashboard", str(bad), "--out", str(tmp_path / "site")]}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_every_verb_refuses_a_malformed_table_with_exit_2_and_one_line(case, table, tmp_path, capsys):
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir(), bad.mkdir()
    table.to_parquet(good / results.PARQUET, index=False)
    BROKEN[case](table.copy()).to_parquet(bad / results.PARQUET, index=False)
    for verb, argv in _verbs(good, bad, tmp_path).items():
        assert cli.main(argv) == 2, (case, verb)
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and WANT[case] in err and "Error" not in err, (case, verb, err)


def test_the_benign_table_passes_every_verb(table, tmp_path, capsys):
    good = tmp_path / "good"
    good.mkdir()
    table.to_parquet(good / results.PARQUET, index=False)
    for verb, argv in _verbs(good, good, tmp_path).items():
        assert cli.main(argv) in (0, 1), verb  # 1: a verdict, never a refusal
