"""rosetta history: series per configuration and machine, levels, steps, outliers, trends, and the gate."""

import json
import math
import random
import xml.etree.ElementTree as ET

import pytest

from harness.cli import main as cli
from harness.gate import changepoints, history
from harness.results import table as results
from tests.helpers.history_rows import sweep_rows


def _store(path, levels, seed=3, **kw):
    """A results folder with one sweep per level (seconds per step)."""
    rng = random.Random(seed)
    results.append(path, [row for i, level in enumerate(levels) for row in sweep_rows(i, level, rng, **kw)])
    return path


def _steps(s):
    return [(st.sweep_id, st.direction, st.verdict) for st in s.steps]


def test_a_ten_percent_step_is_one_confirmed_step_with_its_cause(tmp_path):
    rng = random.Random(3)
    rows = [r for i in range(12) for r in sweep_rows(i, 0.088 if i >= 7 else 0.080, rng,
                                                 torch="2.14.0" if i >= 7 else "2.13.0")]
    [s] = history.series(results.to_frame(rows))
    assert [p.sweep_id for p in s.points] == [f"s{i:02d}" for i in range(12)]
    assert _steps(s) == [("s07", "down", "confirmed")]
    step = s.steps[0]
    assert step.change == pytest.approx(-0.09, abs=0.02)
    assert step.provenance == ("framework_version: 2.13.0 -> 2.14.0", "versions: torch 2.13.0 -> 2.14.0")
    assert [(lv.first, lv.last) for lv in s.levels] == [("s00", "s06"), ("s07", "s11")]
    assert s.verdict.verdict == history.SAME  # the step is old news by the newest sweep


def test_the_gate_fails_on_a_newest_sweep_ten_percent_slower_and_writes_its_reports(tmp_path, capsys):
    store = _store(tmp_path / "store", [0.080] * 11 + [0.088])
    out = tmp_path / "out"
    code = cli.main(["history", str(store), "--junit", str(out / "h.xml"), "--markdown", str(out / "h.md"),
                     "--json", str(out / "h.json")])
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert "regression (suspected)" in printed and (store / "history.png").stat().st_size > 10_000
    doc = json.loads((out / "h.json").read_text())
    assert doc["gate_failed"] is True and doc["format"] == 1
    [series] = doc["series"]
    assert series["verdict"]["verdict"] == "regression" and series["verdict"]["status"] == "suspected"
    assert series["verdict"]["change"] == pytest.approx(-0.09, abs=0.03)
    suite = ET.fromstring((out / "h.xml").read_text())
    assert suite.get("failures") == "1" and suite.find(".//failure").get("type") == "regression"
    assert "**gate failed**" in (out / "h.md").read_text()


def test_the_gate_fails_again_when_the_next_sweep_confirms_the_step_then_passes(tmp_path):
    store = _store(tmp_path / "store", [0.080] * 10 + [0.088] * 2)
    [s] = history.series(results.load(store))
    assert (s.verdict.verdict, s.verdict.status) == (history.REGRESSION, changepoints.CONFIRMED)
    results.append(store, sweep_rows(12, 0.088, random.Random(9)))
    assert cli.main(["history", str(store), "--no-chart"]) == 0


def test_no_change_passes_the_gate(tmp_path, capsys):
    store = _store(tmp_path / "store", [0.080] * 20, seed=5)
    code = cli.main(["history", str(store), "--json", str(tmp_path / "h.json"), "--no-chart"])
    assert code == 0, capsys.readouterr().out
    [series] = json.loads((tmp_path / "h.json").read_text())["series"]
    assert series["steps"] == [] and series["verdict"]["verdict"] == "no change"


def test_one_slow_sweep_is_an_outlier_not_two_steps(tmp_path):
    store = _store(tmp_path / "store", [0.080] * 10 + [0.080 / 0.85] + [0.080] * 9)
    [s] = history.series(results.load(store))
    assert s.steps == () and s.outliers == ("s10",)
    assert [p.label for p in s.points].count("outlier") == 1


def test_a_recovery_is_a_step_up(tmp_path):
    store = _store(tmp_path / "store", [0.080] * 10 + [0.080 / 0.92] * 8 + [0.080] * 8)
    [s] = history.series(results.load(store))
    assert _steps(s) == [("s10", "down", "confirmed"), ("s18", "up", "confirmed")]


def test_drift_is_a_trend_with_its_slope_not_a_staircase(tmp_path):
    store = _store(tmp_path / "store", [0.080 / 0.995 ** k for k in range(30)], spread=0.01)
    [s] = history.series(results.load(store))
    assert s.steps == ()
    [trend] = s.trends
    assert trend.slope == pytest.approx(-0.005, abs=0.0015)


def test_machines_stay_apart_and_host_selects(tmp_path, capsys):
    a = _store(tmp_path / "m1", [0.080] * 12, host="m1")
    b = _store(tmp_path / "m2", [0.088] * 12, seed=4, host="m2")
    both = history.series(history.load([a, b]))
    assert sorted(s.machine for s in both) == ["m1 (cpu, 2 cores)", "m2 (cpu, 2 cores)"]
    assert all(s.steps == () and len(s.points) == 12 for s in both)
    only = history.series(history.load([a, b]), host="m2")
    assert [s.machine for s in only] == ["m2 (cpu, 2 cores)"]
    assert cli.main(["history", str(a), str(b), "--host", "m3", "--no-chart"]) == 2
    assert "no host 'm3'" in capsys.readouterr().err


def test_a_busy_sweep_is_not_judged_and_says_why(tmp_path):
    rng = random.Random(3)
    rows = [r for i in range(11) for r in sweep_rows(i, 0.080, rng)]
    slow = sweep_rows(11, 0.120, rng)
    table = results.to_frame(rows + slow)
    table["machine_busy"] = [False] * len(rows) + [True] * len(slow)
    table["busy_note"] = [None] * len(rows) + ["other processes used 48% of the CPUs"] * len(slow)
    [s] = history.series(table)
    assert s.verdict.verdict == history.NOT_JUDGED and "busy" in s.verdict.note and "48%" in s.verdict.note
    assert not history.gate_failed([s])


@pytest.mark.parametrize("option,value,message", [
    ("--alpha", "nan", "--alpha"), ("--alpha", "1.5", "--alpha"), ("--floor", "inf", "--floor"),
    ("--floor", "-0.1", "--floor"), ("--last", "1", "--last")])
def test_bad_options_are_one_line_and_exit_2(tmp_path, capsys, option, value, message):
    store = _store(tmp_path / "store", [0.080] * 4)
    assert cli.main(["history", str(store), option, value, "--no-chart"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rosetta: error: {message}") and len(err.strip().splitlines()) == 1


def test_unknown_config_is_a_user_error(tmp_path, capsys):
    results.append(tmp_path, sweep_rows(0, 0.08, random.Random(0)))
    assert cli.main(["history", "--results", str(tmp_path), "--config", "nope"]) == 2
    assert "no configuration 'nope'" in capsys.readouterr().err


def test_last_n_and_the_chart_path(tmp_path, monkeypatch):
    store = _store(tmp_path / "store", [0.080] * 12)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["history", str(store / "results.parquet"), "--last", "5"]) == 0
    assert (store / "history.png").exists() and not (tmp_path / "results").exists()
    [s] = history.series(results.load(store), last=5)
    assert [p.sweep_id for p in s.points] == [f"s{i:02d}" for i in range(7, 12)]


def test_a_newest_sweep_without_finite_step_times_is_not_judged(tmp_path):
    rng = random.Random(3)
    rows = [r for i in range(11) for r in sweep_rows(i, 0.080, rng)]
    broken = [{**r, "step_times_s": json.dumps([float("nan"), float("inf")])} for r in sweep_rows(11, 0.080, rng)]
    [s] = history.series(results.to_frame(rows + broken))
    assert s.verdict.verdict == history.NOT_JUDGED and "finite" in s.verdict.note
    assert math.isnan(s.points[-1].rate) and not history.gate_failed([s])
