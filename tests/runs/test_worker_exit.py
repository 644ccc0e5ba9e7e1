"""How a worker process leaves after its ``main`` returned (harness.contract.worker.exit_without_teardown):
what Python's own exit does before its teardown still happens. A real worker process, a framework-free
worker module written for the test."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.contract.axes import Device, Size, Storage, Strategy, Workload
from harness.contract.events import read_rank
from harness.contract.spec import RunSpec, write_spec_file
from tests.helpers import REPO

WORKER = """
import atexit, threading, time
from pathlib import Path

def main(spec, events):
    out = events.out_dir
    def late():  # a thread that is not a daemon: the exit waits for it
        time.sleep(0.5)
        (out / "thread-finished").write_text("yes")
    threading.Thread(target=late).start()
    atexit.register(lambda: (out / "exit-handler-ran").write_text("yes"))
    print("worker output, unflushed", end="")
"""


def _spec() -> RunSpec:
    return RunSpec(scenario="t", framework="none", workload=Workload.RESNET50, size=Size.TINY, workload_options={},
                   nodes=1, procs_per_node=1, batch_per_worker=1, strategy=Strategy.ALLREDUCE,
                   storage=Storage.SYNTHETIC, repeat=0, warmup_steps=0, measured_steps=1, timeout_s=60.0,
                   device=Device.CPU, seed=0)


def _run_worker(tmp_path, module: str, source: str, timeout_s: float) -> tuple[subprocess.CompletedProcess, Path]:
    """The worker module ``module`` (``source``) run under the supervisor as rank 0; its result and run folder."""
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    out = tmp_path / "run"
    out.mkdir()
    write_spec_file(tmp_path / "spec.json", _spec(), out)
    done = subprocess.run([sys.executable, "-m", "harness.contract.worker", module, str(tmp_path / "spec.json")],
                          env={"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin", "RANK": "0"},
                          capture_output=True, text=True, timeout=timeout_s)
    return done, out


def test_a_finished_worker_joins_its_threads_runs_its_exit_handlers_and_flushes_its_output(tmp_path):
    done, out = _run_worker(tmp_path, "exit_probe_worker", WORKER, 60)
    assert done.returncode == 0, done.stderr
    assert (out / "thread-finished").read_text() == "yes"
    assert (out / "exit-handler-ran").read_text() == "yes"
    assert "worker output, unflushed" in (out / "rank0.log").read_text()
    exit_record = read_rank(out, 0).exit
    assert (exit_record["code"], exit_record["signal"]) == (0, None)


MEMORY_WORKER = """
def main(spec, events):
    ballast = bytearray(300 * 2**20)  # 300 MiB, touched page by page so that it is resident
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
"""


def test_the_supervisor_records_the_worker_s_peak_resident_memory_whatever_the_framework(tmp_path):
    done, out = _run_worker(tmp_path, "memory_probe_worker", MEMORY_WORKER, 60)
    assert done.returncode == 0, done.stderr
    assert 300 < read_rank(out, 0).exit["peak_rss_mb"] < 300 + 400  # the ballast and an interpreter's own


HANGING_WORKER = """
import time
import __main__  # the worker process is ``python -m harness.contract.worker``: its module is __main__

def main(spec, events):
    __main__.TEARDOWN_GRACE_S = 1.0  # the real grace is minutes; the test's teardown hangs for 10
    events.emit("end", weights_checksum="x", parameters=0)
    time.sleep(10)  # a teardown that does not return (destroy_process_group's hang)
"""


def test_a_rank_whose_teardown_hangs_after_its_end_record_leaves_by_itself(tmp_path):
    done, out = _run_worker(tmp_path, "hanging_worker", HANGING_WORKER, 8)  # less than the hang: it left by itself
    assert done.returncode == 0, done.stderr
    ranks = read_rank(out, 0)
    assert ranks.end["weights_checksum"] == "x" and (ranks.exit["code"], ranks.exit["signal"]) == (0, None)
    records = [json.loads(line) for line in (out / "events-rank0.jsonl").read_text().splitlines()]
    assert [r for r in records if r["event"] == "teardown"][0]["grace_s"] == 1.0
    assert "teardown did not end within 1 s" in (out / "rank0.log").read_text()
