"""No write follows a link planted in a results folder (issue 52): the report's and history's charts, the
dashboard's pages, a dry run's folders and the redaction's rewrite each overwrote the file a symbolic link
named like their output pointed to. Before harness.base.nofollow every test below but the helper's own found
the outside file overwritten."""

from __future__ import annotations

import os
import random

import pytest

from harness.base import nofollow
from harness.base.errors import UserError
from harness.cli import main as cli
from harness.experiment import scenario
from harness.results import redact, table as results
from harness.running import runner
from tests.helpers.history_rows import sweep_rows
from tests.helpers.rows import result_row

OUTSIDE = b"a file outside the results folder\n"


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside" / "precious"
    path.parent.mkdir()
    path.write_bytes(OUTSIDE)
    return path


def _store(folder) -> None:
    rng = random.Random(3)
    results.append(folder, [{**result_row(), **r} for i in range(6) for r in sweep_rows(i, 0.08, rng)])


def test_a_link_at_the_file_is_refused_in_one_line(tmp_path, outside):
    (tmp_path / "page.html").symlink_to(outside)
    with pytest.raises(UserError, match=r"page.html: is a symbolic link \(to .*precious\)") as info:
        nofollow.write(tmp_path / "page.html", "<p>")
    assert "\n" not in str(info.value) and outside.read_bytes() == OUTSIDE


def test_a_linked_folder_below_within_is_refused_and_the_file_written_otherwise(tmp_path, outside):
    (tmp_path / "runs").symlink_to(outside.parent)
    with pytest.raises(UserError, match="runs: is a symbolic link or not a folder"):
        nofollow.write(tmp_path / "runs" / "precious", "x", within=tmp_path)
    assert outside.read_bytes() == OUTSIDE
    assert nofollow.write(tmp_path / "a" / "b" / "f", "ok", within=tmp_path).read_text() == "ok"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UserError, match="FIFO"):  # and does not hang
        nofollow.write(tmp_path / "fifo", "x")


def test_report_and_history_charts_are_not_written_through_a_link(tmp_path, outside):
    _store(tmp_path)
    sweep = results.load(tmp_path)["sweep_id"].max()
    (tmp_path / f"report-{sweep}.png").symlink_to(outside)
    (tmp_path / "history.png").symlink_to(outside)
    assert cli.main(["report", str(tmp_path)]) == 2
    assert cli.main(["history", str(tmp_path), "--chart", str(tmp_path / "history.png")]) == 2
    assert outside.read_bytes() == OUTSIDE


def test_dashboard_pages_are_not_written_through_a_link(tmp_path, outside):
    _store(tmp_path / "store")
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").symlink_to(outside)
    assert cli.main(["dashboard", str(tmp_path / "store"), "--out", str(site)]) == 2
    assert outside.read_bytes() == OUTSIDE


def test_a_dry_run_does_not_write_into_a_linked_folder(tmp_path, outside):
    (tmp_path / "dry-run").symlink_to(outside.parent)
    parsed = scenario.parse({"matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny"}}, "s.toml")
    with pytest.raises(UserError, match="dry-run: is a symbolic link"):
        runner.dry_run(parsed, tmp_path)
    assert os.listdir(outside.parent) == ["precious"]


def test_redaction_does_not_write_through_a_link_at_its_temporary_name(tmp_path, outside, monkeypatch):
    monkeypatch.setenv("ROSETTA_TEST_TOKEN", "s3cr3t-value-0123456789")
    (tmp_path / "launcher.log").write_text("token s3cr3t-value-0123456789\n")
    (tmp_path / ".launcher.log.scrub").symlink_to(outside)  # the name the rewrite used to take
    assert redact.scrub_folder(tmp_path) == [tmp_path / "launcher.log"]
    assert "s3cr3t" not in (tmp_path / "launcher.log").read_text() and outside.read_bytes() == OUTSIDE
