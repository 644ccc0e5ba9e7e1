"""compare says where: a verdict on rows with per-rank data (the attribution section) names the current
straggler's host and rank, against the baseline's, and the slowest rank's phase that grew most."""

import json
import random

from harness.cli import main as cli
from harness.gate import ci_reports, compare, where
from harness.results import attribution, table as results
from tests.unit.gate.test_compare import _repeats, _rows


def _per_rank(host, rank, score, compute, exchange=0.010, data=0.002, rest=0.001):
    """The attribution columns of one 4-rank row: the slowest rank's phases (s/step), the median rank's the
    baseline's own."""
    return {"slowest_host": host, "slowest_rank": rank, "straggler_score": score, "attribution_phase": "compute",
            "slowest_compute_s": compute, "slowest_exchange_s": exchange, "slowest_data_s": data,
            "slowest_rest_s": rest, "median_compute_s": 0.050, "median_exchange_s": 0.010, "median_data_s": 0.002,
            "median_rest_s": 0.001, "world_size": 4}


def _sides(slow_host="h1", compute=0.065, seed=3, rank=5):
    rng = random.Random(seed)
    base = _rows("a", _repeats(0.063, 3, 12, rng), **_per_rank("h0", 0, 1.01, 0.050))
    level = 0.063 * (1 + (compute - 0.050) / 0.063)
    cur = _rows("a", _repeats(level, 3, 12, rng), **_per_rank(slow_host, rank, 1.24, compute))
    return results.to_frame(base), results.to_frame(cur)


def test_a_slowed_host_is_named_with_the_phase_that_grew():
    base, cur = _sides()
    moved = where.where_moved(base, cur)
    assert moved.current == where.Straggler("h1", 5, 1.24)
    assert moved.baseline == where.Straggler("h0", 0, 1.01)
    assert moved.phase == "compute" and (moved.phase_baseline_s, moved.phase_current_s) == (0.050, 0.065)
    assert moved.text() == ("slowest: host h1 rank 5, 1.24x the median rank (baseline: host h0 rank 0, 1.01x); "
                            "its compute grew most: 0.05 -> 0.065 s/step (+30%); against history: 1.24x the "
                            "median rank's (median of 3 earlier rows)")  # h1 rank 5 was never slowest before
    (cell,) = compare.compare_tables(base, cur)
    assert cell.verdict == compare.REGRESSION and cell.where == moved.text()
    assert "where: slowest: host h1" in ci_reports.describe(cell)
    assert "Where it moved" in ci_reports.markdown([cell], "t") and "host h1" in ci_reports.markdown([cell], "t")
    assert json.loads(json.dumps(ci_reports.verdicts([cell], "t")))["configurations"][0]["where"] == cell.where


def test_a_phase_is_named_only_when_it_grew_beyond_the_wobble():
    base, cur = _sides(slow_host="h0", compute=0.0505, rank=0)  # +0.5 ms of a 63 ms step: under MIN_PHASE_SHARE
    moved = where.where_moved(base, cur)
    assert moved.phase is None and "(baseline: the same" in moved.text() and "grew" not in moved.text()


def test_rows_without_per_rank_data_say_nothing():
    rng = random.Random(1)
    base = results.to_frame(_rows("a", _repeats(0.08, 3, 12, rng)))
    cur = results.to_frame(_rows("a", _repeats(0.10, 3, 12, rng)))
    assert where.where_moved(base, cur) is None
    (cell,) = compare.compare_tables(base, cur)
    assert cell.verdict == compare.REGRESSION and cell.where == "" and "where" not in ci_reports.describe(cell)


def test_without_a_baseline_straggler_the_phase_is_against_the_current_median_rank():
    base, cur = _sides()
    plain = base.drop(columns=[c for c in base.columns if c.startswith(("slowest_", "median_", "straggler"))])
    moved = where.where_moved(plain, cur)
    assert moved.baseline is None and moved.phase == "compute" and moved.phase_baseline_s == 0.050
    assert "baseline" not in moved.text()


def test_compare_prints_where_and_writes_it_to_markdown(tmp_path, capsys):
    base, cur = _sides()
    results.append(tmp_path / "b", base.to_dict("records"))
    results.append(tmp_path / "c", cur.to_dict("records"))
    code = cli.main(["compare", str(tmp_path / "b"), str(tmp_path / "c"), "--markdown", str(tmp_path / "m.md")])
    assert code == 1
    out = capsys.readouterr().out
    assert "where" in out and "host h1 rank 5" in out
    assert "host h1 rank 5" in (tmp_path / "m.md").read_text()


def test_history_names_where_its_step_moved(tmp_path):
    """A series of 8 sweeps whose last 4 are 25% slower because host h2's compute grew: the confirmed step
    carries where it moved, in the JUnit, Markdown and terminal outputs."""
    from harness.gate import history
    from tests.helpers.history_rows import sweep_rows

    rng = random.Random(5)
    rows = []
    for i in range(8):
        slow = i >= 4
        per_rank = _per_rank("h2" if slow else "h0", 2 if slow else 0, 1.25 if slow else 1.01,
                             0.066 if slow else 0.050)
        rows += sweep_rows(i, 0.080 if slow else 0.064, rng, **per_rank)
    [s] = history.series(results.to_frame(rows))
    [step] = [st for st in s.steps if st.direction == "down"]
    assert step.sweep_id == "s04" and step.where.startswith("slowest: host h2 rank 2")
    assert "its compute grew most" in step.where and f"where: {step.where}" in step.causes
    # against history: the 4 sweeps before the step, 3 rows each (h2 rank 2 never slowest there: the median rank's)
    assert "against history: 1.25x the median rank's (median of 12 earlier rows)" in step.where, step.where
    assert "host h2 rank 2" in ci_reports.history_markdown([s], "t")
    assert "host h2 rank 2" in ci_reports.history_junit([s], "t")


def test_the_straggler_is_scored_against_its_own_history_where_the_store_has_one(tmp_path):
    rng = random.Random(5)
    own = _rows("a", _repeats(0.063, 3, 12, rng), **_per_rank("h1", 5, 1.10, 0.055))  # it was slowest, at 0.068
    base, cur = _sides()
    moved = where.where_moved(base, cur, history=results.to_frame(own + base.to_dict("records")))
    assert moved.history.of == "its own" and moved.history.rows == 3
    assert abs(moved.history.score - 0.078 / 0.068) < 1e-9  # its own time: the sum of its phases
    # a per-rank table in a row's folder gives the rank's own time where it was not the slowest (undilated)
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / attribution.FILE).write_text(json.dumps({"format": 1, "ranks": [
        {"rank": 0, "host": "h0", "own_s": 0.8}, {"rank": 5, "host": "h1", "own_s": 1.04}]}))
    kept = _rows("a", _repeats(0.063, 1, 12, rng), run_dir=str(folder), dilation=16.0,
                 **_per_rank("h0", 0, 1.01, 0.050))
    moved = where.where_moved(base, cur, history=results.to_frame(kept))
    assert moved.history.of == "its own" and abs(moved.history.score - 0.078 / 0.065) < 1e-9


def test_a_slowdown_of_every_rank_scores_one_against_the_peers_and_more_against_history():
    rng = random.Random(9)
    base = results.to_frame(_rows("a", _repeats(0.063, 3, 12, rng), **_per_rank("h0", 0, 1.0, 0.050)))
    ring = {**_per_rank("h0", 0, 1.0, 0.050, exchange=0.030), "median_exchange_s": 0.030}  # all ranks' exchange
    cur = results.to_frame(_rows("a", _repeats(0.083, 3, 12, rng), **ring))
    moved = where.where_moved(base, cur)
    assert moved.current.score == 1.0 and moved.phase == "exchange"
    assert moved.history.of == "its own" and abs(moved.history.score - 0.083 / 0.063) < 1e-9
    assert "against history: 1.32x its own (median of 3 earlier rows)" in moved.text()
