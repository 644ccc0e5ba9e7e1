"""One meaning per exit status, for every verb (issue 35; docs/reports.md#exit-statuses-for-ci): 0 success, 1 a
verdict (runs failed, a regression, a drift), 2 input that is wrong, as one line on stderr. A verb added to
the CLI without its cases here fails the last test."""

from __future__ import annotations

import json

import pytest

from harness.cli import main as cli
from harness.results import table as results
from tests.helpers import REPO

STEADY = [[0.080 + 0.0001 * (i % 3)] * 20 for i in range(3)]


def _rows(config_id: str, steps, sweep: str = "s") -> list[dict]:
    base = {"schema_version": results.SCHEMA_VERSION, "sweep_id": sweep, "config_id": config_id, "scenario": "x",
            "framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "nodes": 1, "procs_per_node": 1,
            "world_size": 1, "batch_per_worker": 4, "global_batch": 4, "strategy": "allreduce",
            "storage": "synthetic", "sample_unit": "images", "status": "ok", "cpu_model": "cpu", "cpu_cores": 2}
    return [{**base, "repeat": i, "run_id": f"{sweep}/{config_id}{i}", "timestamp": f"{sweep}{i}",
             "step_times_s": json.dumps(s), "throughput": 4 / min(s)} for i, s in enumerate(steps)]


@pytest.fixture
def tables(tmp_path):
    """base/ and cur/: one configuration the same, one 25% slower; rows/ with row.json copies."""
    results.append(tmp_path / "base", _rows("same", STEADY) + _rows("slow", STEADY))
    results.append(tmp_path / "cur", _rows("same", STEADY) + _rows("slow", [[t * 1.25 for t in s] for s in STEADY]))
    (tmp_path / "rows" / "runs" / "s" / "0000").mkdir(parents=True)
    results.write_row_json(tmp_path / "rows" / "runs" / "s" / "0000" / "row.json", _rows("same", STEADY)[0])
    return tmp_path


# verb -> [(argv after the verb, with {t} for the fixture's folder; expected status)]
CASES = {
    "list": [([], 0), (["--bogus"], 2)],
    "plan": [([], 0), (["{t}/missing.toml"], 2)],
    "run": [(["--dry-run", "--results", "{t}/dry"], 0), (["{t}/missing.toml"], 2), (["--results", "{t}/base/results.csv"], 2)],
    "equivalence": [(["--framework", "nope"], 2)],  # 0 and 1 (a drift): tests/unit/frameworks/test_equivalence.py
    "report": [(["--results", "{t}/base", "--chart", "{t}/r.png"], 0), (["--results", "{t}/empty"], 2),
               (["--results", "{t}/base", "--chart", "{t}/r.txt"], 2)],
    "rebuild": [(["--results", "{t}/rows"], 0), (["--results", "{t}/empty"], 2)],
    "compare": [(["{t}/base", "{t}/base", "--baseline-sweep", "s", "--current-sweep", "s"], 0),
                (["{t}/base", "{t}/cur"], 1), (["{t}/base", "{t}/nowhere"], 2)],
    "history": [(["{t}/base", "--no-chart"], 0), (["{t}/base", "--last", "1"], 2), (["{t}/nowhere"], 2)],
    "reproduce": [(["--list"], 0), (["no-such-reference"], 2), (["goyal-2017", "--at", "published", "--gpus", "-5"], 2)],
    "dashboard": [(["{t}/base", "--out", "{t}/site"], 0), (["{t}/nowhere"], 2)],
    "export": [(["mlflow", "--results", "{t}/empty"], 2)],
    "comm": [(["--report", "--results", "{t}/empty"], 2), (["--max-bytes", "inf"], 2)],
    "project": [([], 0), (["--tau", "0"], 2)],
    # 0 and 1 need hosts: tests/unit/doctor/test_outputs.py (a report's status), tests/runs/test_doctor.py
    "doctor": [([], 2), (["a", "b", "--remote", "netns", "--json", "{t}/base/results.csv/x.json"], 2)],
    "data": [(["make"], 2)],
}


@pytest.mark.parametrize("verb, argv, status", [(v, a, s) for v, cases in CASES.items() for a, s in cases],
                         ids=lambda x: x if isinstance(x, str) else None)
def test_each_verb_exits_with_one_meaning_per_status(verb, argv, status, tables, capsys):
    argv = [a.format(t=tables) for a in argv]
    assert cli.main([verb, *argv]) == status
    err = capsys.readouterr().err
    if status == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("rosetta"), err
        assert "Traceback" not in err


def test_every_verb_has_its_exit_statuses_tested():
    parser = cli._parser()
    verbs = next(a for a in parser._actions if a.dest == "command").choices
    assert set(verbs) == set(CASES), "a verb without exit-status cases here (and in docs/reports.md)"


def test_the_exit_status_table_names_every_verb():

    doc = (REPO / "docs" / "reports.md").read_text()
    section = doc.split("## Exit statuses (for CI)", 1)[1].split("\n## ", 1)[0]
    for verb in CASES:
        assert f"`{verb}`" in section, verb
