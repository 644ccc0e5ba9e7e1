"""The gate's record (harness/gate/sequential.py and launches.py, through changepoints and history): what CI
sees after each sweep is what a fresh run on that prefix says; accepted baselines; launches slowed by a
neighbour; power (the minimum detectable effect) and the canary that checks it."""

import json
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.cli import main as cli
from harness.gate import canary, changepoints, history, marks, sequential
from harness.results import table as results
from tests.helpers.history_rows import sweep_rows


def _launches(levels, noise, rng, launches=3, slowed=0.0, by=1.25):
    """samples/s per sweep and launch: lognormal launch noise, a share ``slowed`` of launches ``by`` slower."""
    return [[100 * level * math.exp(rng.gauss(0, noise)) / (by if rng.random() < slowed else 1.0)
             for _ in range(launches)] for level in levels]


@st.composite
def histories(draw):
    n = draw(st.integers(8, 28))
    levels = [1.0] * n
    if draw(st.booleans()):
        at, size = draw(st.integers(4, n - 1)), draw(st.floats(-0.25, 0.25))
        levels = [1.0 if i < at else 1 + size for i in range(n)]
    if draw(st.booleans()):
        levels[draw(st.integers(0, n - 1))] *= draw(st.floats(0.7, 1.3))
    rng = random.Random(draw(st.integers(0, 10 ** 6)))
    return _launches(levels, draw(st.floats(0.005, 0.08)), rng, launches=draw(st.integers(1, 4)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_every_prefix_judged_afresh_says_what_the_record_said_and_confirmed_steps_stay(launches):
    """CI holds the store after sweep n: a fresh analysis of that prefix reads as the pass read it at n, and
    the steps confirmed by then are in every later report, unchanged."""
    gate = changepoints.replay(launches)
    earlier = []
    for n in range(len(launches)):
        fresh = changepoints.analyse(launches[:n + 1])
        assert fresh.reading == gate.readings[n]
        confirmed = [(c.index, c.decided, c.direction, c.change) for c in fresh.changes]
        assert confirmed[:len(earlier)] == earlier
        earlier = confirmed


def test_a_newest_sweep_ten_percent_down_is_reported_as_about_ten_percent_at_its_own_sweep():
    launches = _launches([1.0] * 35 + [0.9], 0.02, random.Random(1))
    a = changepoints.analyse(launches)
    assert a.reading.decision == sequential.SUSPECTED and a.reading.step == 35
    assert a.reading.change == pytest.approx(-0.10, abs=0.02) and a.reading.p_value < 1e-4
    assert not a.reading.fails and a.changes == ()


def test_one_launch_in_five_slowed_by_a_quarter_is_modelled_and_fails_nothing():
    """A neighbour on a shared runner, no change: no prefix fails CI, the slow mode is found, and the sweeps
    where two of three launches were slowed do not move."""
    rng = random.Random(7)
    launches = _launches([1.0] * 40, 0.02, rng, slowed=0.2)
    gate = changepoints.replay(launches)
    assert not any(r.fails for r in gate.readings)
    # a sweep whose every launch was slowed cannot be told from a slower sweep; no other one is suspected
    suspected = {r.index for r in gate.readings if r.decision == sequential.SUSPECTED}
    assert suspected == {i for i, rates in enumerate(launches) if max(rates) < 90}
    model = gate.figures.model
    assert model.slowed_share == pytest.approx(0.2, abs=0.08) and model.slowdown == pytest.approx(math.log(1.25), abs=0.05)
    moved = [abs(math.exp(y) / 100 - 1) for i, y in zip(gate.judged, gate.figures.y) if i not in suspected]
    assert max(moved) < 0.05  # the figures stay on the clean mode, two slowed launches of three included
    assert sum(sum(1 for r in rates if r < 90) >= 2 for rates in launches) >= 3  # (and there are such sweeps)


def test_a_busy_launch_and_an_outlier_launch_do_not_move_their_sweeps_figure():
    rng = random.Random(3)
    rows = [r for i in range(12) for r in sweep_rows(i, 0.080, rng)]
    plain = history.series(results.to_frame(rows))[0].points[5].rate
    slow = sweep_rows(5, 0.160, rng, repeats=1)[0]  # a fourth launch of sweep 5, twice as slow
    busy = {**slow, "run_id": "m1/s05/cfg/9", "machine_busy": True, "busy_note": "other processes used 60%"}
    unmarked = {**slow, "run_id": "m1/s05/cfg/8"}
    for extra in (busy, unmarked):
        [s] = history.series(results.to_frame(rows + [extra]))
        assert s.points[5].rate == pytest.approx(plain, rel=0.005), extra["run_id"]
    [s] = history.series(results.to_frame(rows + [unmarked]))
    assert s.points[5].slowed == 1 and s.verdict.verdict == history.SAME


def test_the_minimum_detectable_effect_grows_with_noise_and_shrinks_with_launches():
    def mde(noise, launches):
        return changepoints.analyse(_launches([1.0] * 30, noise, random.Random(2), launches=launches)).mde

    assert mde(0.02, 3) < mde(0.06, 3) < mde(0.12, 3)
    assert mde(0.06, 6) < mde(0.06, 3) < mde(0.06, 2)
    assert 0.03 < mde(0.001, 3) < 0.031  # beyond the floor, by what the noise needs for 80% power


def test_the_canary_sees_a_step_of_the_stated_size_and_says_so_when_the_gate_is_blind(monkeypatch):
    launches = _launches([1.0] * 30, 0.03, random.Random(4))
    a = changepoints.analyse(launches)
    judged = [True] * len(launches)
    seen = canary.run(launches, judged, {}, 0.01, 0.03, a.mde)
    assert seen.state == canary.SEEN and seen.placements == canary.PLACEMENTS and seen.planted == -a.mde
    # a gate that confirms nothing: the canary can fail
    monkeypatch.setattr(sequential.Pass, "_settle", lambda self, t, c, direction, members: None)
    monkeypatch.setattr(sequential.Pass, "_split", lambda self, t: None)
    blind = canary.run(launches, judged, {}, 0.01, 0.03, a.mde)
    assert blind.blind and blind.seen == 0 and blind.note.startswith("blind: ")
    monkeypatch.undo()
    busy = canary.run(launches, judged[:-8] + [False] * 8, {}, 0.01, 0.03, a.mde)  # its newest sweeps not judged
    assert busy.blind and "not judged" in busy.note
    short = canary.run(launches[:4], judged[:4], {}, 0.01, 0.03, changepoints.analyse(launches[:4]).mde)
    assert short.state == canary.NOT_RUN


def _step_store(tmp_path):
    rng = random.Random(3)
    store = tmp_path / "store"
    results.append(store, [r for i in range(14) for r in sweep_rows(i, 0.080 if i < 10 else 0.096, rng)])
    return store


def test_an_accepted_sweep_is_the_new_normal_in_this_run_and_every_later_one(tmp_path, capsys):
    store = _step_store(tmp_path)
    rows = results.load(store)
    first = [history.series(rows[rows["sweep_id"] <= f"s{n:02d}"])[0].verdict for n in range(10, 14)]
    assert [v.fails for v in first].count(True) == 1
    code = cli.main(["history", str(store), "--no-chart", "--accept", "s10", "--reason", "bigger batches from s10",
                     "--json", str(tmp_path / "h.json")])
    assert code == 0 and "accepted s10 as the new normal" in capsys.readouterr().out
    doc = json.loads(marks.path_for(store).read_text())
    assert doc["format"] == marks.FORMAT and doc["marks"][0]["sweep_id"] == "s10" and doc["marks"][0]["at"]
    [s] = json.loads((tmp_path / "h.json").read_text())["series"]
    [step] = s["steps"]
    assert (step["sweep_id"], step["verdict"], step["note"]) == ("s10", "accepted", "bigger batches from s10")
    assert s["points"][10]["label"] == "accepted: bigger batches from s10"
    replayed = [history.series(rows[rows["sweep_id"] <= f"s{n:02d}"], marks=marks.read([store]))[0].verdict
                for n in range(10, 14)]
    assert not any(v.fails for v in replayed)


@pytest.mark.parametrize("args,message", [
    (["--accept", "s10"], "--reason"), (["--accept", "s99", "--reason", "x"], "no sweep 's99'"),
    (["--accept", "s10", "--reason", " "], "--reason")])
def test_accept_needs_a_reason_and_a_sweep_that_is_there(tmp_path, capsys, args, message):
    store = _step_store(tmp_path)
    assert cli.main(["history", str(store), "--no-chart", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not marks.path_for(store).exists()


@pytest.mark.parametrize("text", ['{"format": 9, "marks": []}', '{"format": 1, "marks": [{"sweep_id": "s1"}]}',
                                  '{"format": 1, "marks": [{"sweep_id": "s1", "reason": "r", "color": "red"}]}',
                                  "not json"])
def test_a_damaged_marks_file_is_one_line_naming_it(tmp_path, capsys, text):
    store = _step_store(tmp_path)
    marks.path_for(store).write_text(text)
    assert cli.main(["history", str(store), "--no-chart"]) == 2
    err = capsys.readouterr().err.strip()
    assert marks.FILE in err and len(err.splitlines()) == 1
