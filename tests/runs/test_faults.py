"""Faults provoked for real: ranks that crash, are killed, exit early or hang; a harness
killed with SIGKILL or interrupted with Ctrl-C; a sweep resumed. Nothing is mocked."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytest.importorskip("torch")

from harness.contract.events import read_rank  # noqa: E402
from harness.experiment import scenario
from harness.results import table as results  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402
from tests.helpers import (
    REPO,
    faults,  # noqa: E402
)

FAULTY = """
name = "faulty"
[settings]
warmup_steps = 1
measured_steps = 4
repeats = 1
timeout_s = {timeout}
device = "cpu"
[matrix]
framework = "faulty_ddp"
workload = "resnet50"
size = "tiny"
procs_per_node = {procs}
batch_per_worker = 2
"""


def _worker_pids(results_dir: Path) -> list[int]:
    """The pids every rank reported in its hello record, in every run under ``results_dir``."""
    pids = []
    for events in results_dir.glob("runs/*/*/events-rank*.jsonl"):
        pids += [json.loads(line)["pid"] for line in events.read_text().splitlines() if '"hello"' in line]
    return pids


def _all_gone(pids: list[int], within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return True
        time.sleep(0.2)
    return False


def _faulty_sweep(monkeypatch, write_scenario, tmp_path, fault: str, procs="2", timeout=120):
    faults.register(monkeypatch)
    monkeypatch.setenv("ROSETTA_TEST_FAULT", fault)
    sc = scenario.load(write_scenario(FAULTY.format(procs=procs, timeout=timeout)))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    rows = run_sweep(sc, tmp_path / "results")
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], "processes left behind"
    assert _all_gone(_worker_pids(tmp_path / "results"))
    return rows


@pytest.mark.parametrize("fault, first_cause", [
    ("raise:1:1", "first: rank 1: RuntimeError: provoked failure"),
    ("segfault:1:1", "first: rank 1 killed by SIGSEGV, a segmentation fault, after measured step 2"),
    ("sigkill:1:1", "first: rank 1 killed by SIGKILL, as the kernel's OOM killer sends, after measured step 2"),
    ("exit0:1:1", "first: rank 1 exited with status 0 after measured step 2, before finishing"),
])
def test_a_failing_rank_becomes_a_failed_row_naming_it(monkeypatch, write_scenario, tmp_path, fault, first_cause):
    rows = _faulty_sweep(monkeypatch, write_scenario, tmp_path, fault)
    (row,) = rows
    assert row["status"] == "failed"
    assert row["reason"].startswith("launcher exit code 1; " + first_cause), row["reason"]
    assert "rank 0" in row["reason"]  # the survivor's fate is told too, after the cause
    assert row.get("throughput") is None


def test_a_hung_collective_times_out_and_every_process_is_killed(monkeypatch, write_scenario, tmp_path):
    rows = _faulty_sweep(monkeypatch, write_scenario, tmp_path, "hang:1:1", timeout=25)
    assert rows[0]["status"] == "timeout"
    assert rows[0]["reason"] == ("no exit within 25 s (rank 0 still running after measured step 2 of 4; "
                                 "rank 1 still running after measured step 2 of 4)")


def test_the_sweep_goes_on_after_a_failure_and_resume_runs_only_what_did_not_complete(
        monkeypatch, write_scenario, tmp_path):
    rows = _faulty_sweep(monkeypatch, write_scenario, tmp_path, "raise:1:0", procs="[2, 1]")
    assert [(r["world_size"], r["status"]) for r in rows] == [(2, "failed"), (1, "ok")]

    monkeypatch.setenv("ROSETTA_TEST_FAULT", "raise:9:0")  # no rank 9: the fault is gone
    sc = scenario.load(tmp_path / "scenario.toml")
    resumed = run_sweep(sc, tmp_path / "results", resume=True)
    assert [(r["world_size"], r["status"]) for r in resumed] == [(2, "ok")]
    assert resumed[0]["sweep_id"] == rows[0]["sweep_id"]
    assert resumed[0]["run_id"].endswith("/0002")  # a fresh folder: the failed attempt's is kept
    assert run_sweep(sc, tmp_path / "results", resume=True) == []
    table = results.load(tmp_path / "results")
    assert sorted(zip(table["world_size"], table["status"])) == [(1, "ok"), (2, "failed"), (2, "ok")]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _rosetta(*args: str) -> subprocess.Popen:
    # started with SIGINT ignored, as a background job of a non-interactive shell (a CI script) is: the
    # harness must still stop on it
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=_ignore_sigint)


def _wait_for(predicate, timeout_s: float = 300.0) -> None:  # a bound on a hang, generous for a loaded machine
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def _table_rows(results_dir: Path) -> int:
    try:
        return len(results.load(results_dir))
    except Exception:  # noqa: BLE001 - the very first write may not have happened yet
        return 0


SEVERAL = """
name = "several"
[settings]
warmup_steps = 1
measured_steps = 2
repeats = 3
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
batch_per_worker = 2
"""


@pytest.mark.parametrize("delay_s", [0.0, 0.8])
def test_sigkill_of_the_harness_loses_no_row_and_resume_completes_the_sweep(write_scenario, tmp_path, delay_s):
    path, out = write_scenario(SEVERAL), tmp_path / "results"
    harness = _rosetta("run", str(path), "--results", str(out))
    _wait_for(lambda: _table_rows(out) >= 1)
    time.sleep(delay_s)
    harness.kill()
    harness.wait()
    table = results.load(out)  # readable, every row written before the kill intact
    assert len(table) >= 1 and set(table["status"]) == {"ok"}
    for row_file in out.glob("runs/*/*/row.json"):
        json.loads(row_file.read_text())
    assert _all_gone(_worker_pids(out))  # the launch died with the harness

    resumed = _rosetta("run", str(path), "--results", str(out), "--resume")
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    table = results.load(out)
    ok = table[table["status"] == "ok"]
    assert sorted(ok["repeat"]) == [0, 1, 2]  # each repeat completed exactly once
    assert table["sweep_id"].nunique() == 1
    assert not list(out.glob(".*.tmp"))


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_marks_the_current_run_interrupted_and_leaves_no_process(write_scenario, tmp_path, stop):
    path = write_scenario(SEVERAL.replace("measured_steps = 2", "measured_steps = 100000"))
    out = tmp_path / "results"
    harness = _rosetta("run", str(path), "--results", str(out))
    try:
        _wait_for(lambda: any(read_rank(d, 0).step_seconds for d in out.glob("runs/*/0000")))
        harness.send_signal(stop)  # what Ctrl-C sends to the harness, or a batch system at a time limit
        output, _ = harness.communicate(timeout=240)  # a bound on a hang; the stop takes seconds
    finally:
        if harness.poll() is None:  # it ignored the signal: stop it here, not leave a 100,000-step run behind
            harness.send_signal(signal.SIGTERM)
            harness.communicate(timeout=240)
    assert harness.returncode == 130, output
    assert "interrupted" in output
    table = results.load(out)
    assert list(table["status"]) == ["interrupted"]
    assert _all_gone(_worker_pids(out))
