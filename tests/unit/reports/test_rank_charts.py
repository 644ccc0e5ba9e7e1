"""The per-rank chart from hand-made rows whose run folders hold a per-rank breakdown (no runs): the rank a
planted slowdown is on drawn as the straggler, a configuration's median repeat chosen, rows without per-rank
data or with a broken file left out, the chart written through nofollow."""

from __future__ import annotations

import os

import pytest

from harness.base.errors import UserError
from harness.reports import rank_charts
from harness.results import attribution
from harness.results import table as results
from harness.running.collect import attribution_fields
from tests.helpers.rows import result_row
from tests.unit.results.test_attribution import _run


def _row(tmp_path, repeat: int, slow: int, compute: float, **kw) -> dict:
    """A 4-rank row of configuration c1 whose folder keeps the breakdown of a run with rank ``slow`` slow."""
    run_dir = tmp_path / f"run{repeat}"
    run_dir.mkdir()
    fields = attribution_fields(_run(slow, compute=compute), run_dir)
    return result_row(run_id=f"s1/{repeat}", repeat=repeat, procs_per_node=4, world_size=4,
                      run_dir=str(run_dir), **fields, **kw)


def test_the_straggler_of_the_median_repeat_is_drawn(tmp_path):
    rows = [_row(tmp_path, 0, 2, 0.10), _row(tmp_path, 1, 1, 0.14), _row(tmp_path, 2, 3, 0.12)]
    [(label, row, ranks)] = rank_charts.per_rank_runs(results.to_frame(rows))
    assert row["repeat"] == 2 and row["slowest_rank"] == 3  # scores 1.21, 1.63, 1.42: the middle one
    assert "repeat 2 of 3" in label and "4" in label
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert ranks[3]["compute_s"] == pytest.approx(0.12) and ranks[0]["peer_wait_s"] > 0
    path = rank_charts.plot_ranks(results.to_frame(rows), tmp_path / "report-ranks.png")
    assert path == tmp_path / "report-ranks.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000


def test_rows_without_per_rank_data_draw_nothing(tmp_path):
    one_rank = result_row()  # no slowest_host: a 1-rank run
    assert rank_charts.plot_ranks(results.to_frame([one_rank]), tmp_path / "a.png") is None
    broken = _row(tmp_path, 0, 2, 0.10)
    (tmp_path / "run0" / attribution.FILE).write_text('{"format": 1, "ranks": [{"rank": "x"}')  # cut short
    assert attribution.read_table(tmp_path / "run0") is None
    gone = _row(tmp_path, 1, 2, 0.10, config_id="c2")
    (tmp_path / "run1" / attribution.FILE).unlink()  # the folder moved on: the row alone, nothing to draw
    assert rank_charts.plot_ranks(results.to_frame([broken, gone]), tmp_path / "b.png") is None
    assert not (tmp_path / "a.png").exists() and not (tmp_path / "b.png").exists()


def test_a_link_planted_where_the_chart_goes_is_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / "report-ranks.png")
    with pytest.raises(UserError, match="symbolic link"):
        rank_charts.plot_ranks(results.to_frame([_row(tmp_path, 0, 2, 0.10)]), tmp_path / "report-ranks.png")
    assert victim.read_text() == "keep"
