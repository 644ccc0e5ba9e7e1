"""Tables read back are data from outside (issue 35): identifiers that would be paths are refused, the results
folder is the only place the harness writes, a resumed sweep keeps its own configurations, a report never
merges two configurations, and every damaged table or bad output path is one line and exit 2."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from harness.base.errors import UserError
from harness.cli import main as cli
from harness.experiment import scenario
from harness.experiment.matrix import expand
from harness.reports import aggregate, terminal
from harness.results import table as results
from harness.running import runner
from tests.helpers.rows import result_row

SCENARIO = {"name": "tiny", "settings": {"repeats": 1, "warmup_steps": 1, "measured_steps": 3, "device": "cpu"},
            "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "batch_per_worker": [2, 4]}}


def _one_line_exit_2(argv, capsys) -> str:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith("rosetta: error: "), captured.err
    return captured.err


def _files(root) -> set:
    return {p for p in root.rglob("*") if p.is_file()}


# ------------------------------------------------------------------ identifiers never become paths

@pytest.mark.parametrize("bad", ["../../escape", "/abs/path", "..", "a/b", ".hidden", "x\ny", ""])
def test_a_sweep_id_that_is_no_name_is_refused_by_report_and_nothing_is_written_outside(bad, tmp_path, capsys):
    out = tmp_path / "deep" / "results"
    results.append(out, [result_row(sweep_id=bad, run_id=f"{bad}/0000")])
    before = _files(tmp_path)
    err = _one_line_exit_2(["report", "--results", str(out)], capsys)
    assert "sweep_id" in err and "not an identifier" in err
    assert _files(tmp_path) == before


def test_resume_with_a_sweep_id_that_is_a_path_makes_no_folder_outside_the_results(tmp_path, capsys):
    out = tmp_path / "deep" / "results"
    results.append(out, [result_row(sweep_id="../../outside", run_id="x/0000", status="failed")])
    path = tmp_path / "s.toml"
    path.write_text('name = "tiny"\n[matrix]\nframework = "torch_ddp"\nworkload = "resnet50"\n')
    _one_line_exit_2(["run", str(path), "--results", str(out), "--resume"], capsys)
    assert not (tmp_path / "outside").exists() and not (tmp_path / "deep" / "outside").exists()


def test_report_sweep_argument_is_a_name(tmp_path, capsys):
    results.append(tmp_path, [result_row()])
    err = _one_line_exit_2(["report", "--results", str(tmp_path), "--sweep", "../s1"], capsys)
    assert "no sweep '../s1'" in err


# ------------------------------------------------------------------ --resume with an edited scenario

def _planned_sweep(out, doc) -> str:
    """A sweep of ``doc`` that ran its first configuration only (then was stopped): its plan and its row."""
    specs = expand(scenario.parse(doc, "s.toml"))
    runner.write_plan(out / "runs" / "s1", "tiny", specs)
    results.append(out, [result_row(config_id=specs[0].config_id())])
    return specs[1].config_id()


def test_resume_refuses_a_scenario_edited_since_the_sweep_started(tmp_path):
    out = tmp_path / "results"
    _planned_sweep(out, SCENARIO)
    edited = {**SCENARIO, "settings": {**SCENARIO["settings"], "seed": 7}}  # only the seed changed
    with pytest.raises(UserError, match=r"^--resume: the scenario's configurations differ from those sweep s1 was "
                                        r"started with \(4 differ.*run without --resume"):
        runner.run_sweep(scenario.parse(edited, "s.toml"), out, resume=True)
    grown = {**SCENARIO, "matrix": {**SCENARIO["matrix"], "batch_per_worker": [2, 4, 8]}}
    with pytest.raises(UserError, match="differ from those sweep s1"):
        runner.run_sweep(scenario.parse(grown, "s.toml"), out, resume=True)
    assert sorted(p.name for p in (out / "runs" / "s1").iterdir()
                  if p.name != runner.SWEEP_LOCK) == [runner.PLAN]  # nothing ran (the lock is held while it looks)


def test_resume_of_a_sweep_from_before_plans_refuses_configurations_it_never_had(tmp_path):
    out = tmp_path / "results"
    results.append(out, [result_row(config_id="not-this-scenarios")])
    with pytest.raises(UserError, match="differ from those sweep s1"):
        runner.run_sweep(scenario.parse(SCENARIO, "s.toml"), out, resume=True)


def test_report_never_merges_two_configurations_into_one_line(capsys):
    rows = [result_row(config_id=c, repeat=r, run_id=f"s1/{i:04d}", throughput=t, timestamp=f"t{i}")
            for i, (c, r, t) in enumerate([("seed0", 0, 100.0), ("seed0", 1, 102.0), ("seed7", 0, 300.0)])]
    summary = aggregate.summarize(results.to_frame(rows))
    assert sorted(zip(summary["config_id"], summary["runs"], summary["throughput_median"])) == [
        ("seed0", 2, 101.0), ("seed7", 1, 300.0)]
    from rich.console import Console

    terminal.print_table(summary, Console(width=200))
    out = capsys.readouterr().out
    assert "config" in out and "seed0" in out and "seed7" in out and "2/2" in out and "1/1" in out


# ------------------------------------------------------------------ one line and exit 2, nothing printed first

def test_a_scenario_whose_excludes_remove_every_run_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('[matrix]\nframework = "torch_ddp"\nworkload = "resnet50"\n[[exclude]]\nworkload = "resnet50"\n')
    for verb in (["plan", str(path)], ["run", str(path), "--results", str(tmp_path / "r")]):
        err = _one_line_exit_2(verb, capsys)
        assert "exclude: removes every configuration" in err


@pytest.mark.parametrize("damage", ["folder", "no_version", "extra_column", "wrong_type", "empty_file"])
@pytest.mark.parametrize("verb", ["report", "run", "resume"])
def test_a_damaged_table_is_one_line_for_report_run_and_resume(damage, verb, tmp_path, capsys):
    out = tmp_path / "results"
    out.mkdir()
    table = out / results.PARQUET
    if damage == "folder":
        table.mkdir()
    elif damage == "empty_file":
        table.write_bytes(b"")
    else:
        frame = results.to_frame([result_row()])
        if damage == "no_version":
            frame = frame.drop(columns=["schema_version"])
        elif damage == "extra_column":
            frame["from_the_future"] = 1
        else:
            frame["throughput"] = "fast"
        frame.to_parquet(table, index=False)
    path = tmp_path / "s.toml"
    path.write_text('name = "tiny"\n[matrix]\nframework = "torch_ddp"\nworkload = "resnet50"\n')
    argv = {"report": ["report", "--results", str(out)], "run": ["run", str(path), "--results", str(out)],
            "resume": ["run", str(path), "--results", str(out), "--resume"]}[verb]
    err = _one_line_exit_2(argv, capsys)
    assert str(table) in err
    assert not (out / "runs").exists()  # refused before any run


def test_results_that_cannot_be_written_are_one_line_before_anything_runs(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('[matrix]\nframework = "torch_ddp"\nworkload = "resnet50"\n')
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "is a file" in _one_line_exit_2(["run", str(path), "--dry-run", "--results", str(a_file)], capsys)
    assert "is a file" in _one_line_exit_2(["run", str(path), "--results", str(a_file)], capsys)
    unwritable = "/proc/rosetta-results"  # not writable even by root
    assert "not writable" in _one_line_exit_2(["run", str(path), "--dry-run", "--results", unwritable], capsys)
    assert "not writable" in _one_line_exit_2(["run", str(path), "--results", unwritable], capsys)


def test_report_chart_with_a_name_no_chart_has_is_one_line(tmp_path, capsys):
    results.append(tmp_path, [result_row()])
    err = _one_line_exit_2(["report", "--results", str(tmp_path), "--chart", str(tmp_path / "x.txt")], capsys)
    assert "--chart" in err and ".png" in err


@pytest.mark.parametrize("flag", ["--json", "--markdown", "--junit"])
@pytest.mark.parametrize("where", ["under_a_file", "a_folder"])
def test_compare_outputs_are_checked_before_the_table_is_printed(flag, where, tmp_path, capsys):
    results.append(tmp_path / "r", [result_row()])
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder").mkdir()
    target = tmp_path / "file" / "out" if where == "under_a_file" else tmp_path / "folder"
    assert cli.main(["compare", str(tmp_path / "r"), str(tmp_path / "r"), flag, str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and flag in captured.err


def test_the_write_check_leaves_nothing_behind(tmp_path):
    from harness.results import integrity

    integrity.writable_folder(tmp_path / "new")
    assert os.listdir(tmp_path / "new") == []


def test_identifiers_in_a_table_written_by_hand_are_checked_row_by_row(tmp_path):
    frame = results.to_frame([result_row(), result_row(run_id="s1/../../x", repeat=1)])
    frame.to_parquet(tmp_path / results.PARQUET, index=False)
    with pytest.raises(UserError, match=r"row 1: run_id 's1/../../x' is not an identifier"):
        results.load(tmp_path)
    assert pd.read_parquet(tmp_path / results.PARQUET).shape[0] == 2  # the table is left as it was
