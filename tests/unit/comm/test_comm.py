"""rosetta comm: arithmetic, settings as data, and a real two-process gloo run through torchrun."""

import json
from pathlib import Path

import pytest

from harness.base.errors import UserError
from harness.comm import results as comm_results
from harness.comm.bandwidth import algbw, bus_factor, busbw
from harness.comm.runner import run_comm, skip_reason
from harness.comm.settings import expand, iterations, load_settings, message_sizes
from harness.contract.axes import Backend, Collective, Device
from harness.contract.events import events_path
from harness.contract.spec import read_spec_file, write_comm_spec_file


def test_bus_factors_follow_nccl_tests():
    assert bus_factor(Collective.ALLREDUCE, 2) == 1.0
    assert bus_factor(Collective.ALLREDUCE, 8) == pytest.approx(1.75)
    assert bus_factor(Collective.ALLGATHER, 4) == pytest.approx(0.75)
    assert bus_factor(Collective.BROADCAST, 16) == 1.0
    assert bus_factor(Collective.ALLREDUCE, 1) == 0.0
    assert algbw(1_000_000, 0.001) == pytest.approx(1e9)
    assert busbw(Collective.ALLREDUCE, 1_000_000, 0.001, 4) == pytest.approx(1.5e9)


def test_sizes_and_iterations():
    assert message_sizes(4, 64, 2) == [4, 8, 16, 32, 64]
    assert message_sizes(4, 100, 4) == [4, 16, 64]
    assert message_sizes(6, 30, 2) == [4, 12, 24]  # whole float32 elements
    assert iterations(4, 20, 5, 1 << 30) == 20
    assert iterations(256 << 20, 20, 5, 1 << 30) == 5  # 4 x 256 MiB would exceed; floor at min_iters
    assert iterations(128 << 20, 20, 5, 1 << 30) == 8
    assert iterations(4, 3, 5, 1) == 3  # never more than asked


def test_settings_file_and_flags(tmp_path):
    path = tmp_path / "comm.toml"
    path.write_text('[comm]\nbackends = "gloo"\nworld_sizes = [2, 3]\nmax_bytes_cpu = 1024\n')
    s = load_settings(path, iters=7)
    assert s.backends == (Backend.GLOO,) and s.world_sizes == (2, 3) and s.max_bytes_cpu == 1024 and s.iters == 7
    path.write_text('[comm]\nbackend = "gloo"\n')
    with pytest.raises(UserError, match=r"\[comm\] backend: unknown key; allowed: backends"):
        load_settings(path)
    path.write_text('[comm]\nbackends = "tcp"\n')
    with pytest.raises(UserError, match="must be one of gloo, nccl, mpi, horovod"):
        load_settings(path)
    with pytest.raises(UserError, match="--iters: must be >= 1"):
        load_settings(None, iters=0)
    with pytest.raises(UserError, match="min_bytes"):
        load_settings(None, min_bytes=4096, max_bytes_cpu=1024)


def test_spec_file_round_trip(tmp_path):
    spec = expand(load_settings(None, max_bytes_cpu=64), Backend.GLOO, 2, "cpu")
    write_comm_spec_file(tmp_path / "spec.json", spec, tmp_path)
    back, out_dir = read_spec_file(tmp_path / "spec.json")
    assert back == spec and out_dir == tmp_path and back.world_size == 2


def test_skip_reasons_name_what_is_missing():
    no_gpu = {"torch": "2", "gloo": True, "nccl": True, "mpi": False, "cuda": False, "gpu_count": 0}
    assert skip_reason(Backend.GLOO, 2, Device.AUTO, no_gpu) is None
    assert "no CUDA" in skip_reason(Backend.NCCL, 2, Device.AUTO, no_gpu)
    assert "without MPI" in skip_reason(Backend.MPI, 2, Device.AUTO, no_gpu)
    with_mpi = {**no_gpu, "mpi": True}
    assert "launcher = \"mpirun\"" in skip_reason(Backend.MPI, 2, Device.AUTO, with_mpi)
    assert skip_reason(Backend.MPI, 2, Device.AUTO, with_mpi, launcher="mpirun") is None
    gpus = {**no_gpu, "cuda": True, "gpu_count": 1}
    assert skip_reason(Backend.NCCL, 2, Device.AUTO, gpus) == "needs 2 GPUs, 1 here"
    assert "torch" in skip_reason(Backend.GLOO, 2, Device.AUTO, {"torch": None})


@pytest.mark.runs
def test_real_gloo_run_keeps_raw_timings_of_the_slowest_rank(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    settings = load_settings(None, backends=["gloo", "horovod"], max_bytes_cpu=4096, step_factor=32,
                             warmup_iters=1, iters=3)
    monkeypatch.chdir(tmp_path / "..")  # the results folder named relative to here; the ranks start in the repository
    rows = run_comm(settings, Path(tmp_path.name))
    ok = [r for r in rows if r["status"] == "ok"]
    # allreduce and broadcast at 4, 128, 4096 B; allgather needs one element per rank: 128, 4096
    assert sorted((r["collective"], r["bytes"]) for r in ok) == sorted(
        [(c, b) for c in ("allreduce", "broadcast") for b in (4, 128, 4096)] + [("allgather", 128), ("allgather", 4096)])
    horovod = [r for r in rows if r["backend"] == "horovod"]
    assert horovod[0]["status"] == "skipped" and horovod[0]["reason"]
    run_dir = tmp_path / "runs" / ok[0]["run_id"]
    per_rank = [[json.loads(line) for line in events_path(run_dir, rank).read_text().splitlines()] for rank in (0, 1)]
    for row in ok:
        raw = [next(e["seconds"] for e in records if e["event"] == "comm" and e["collective"] == row["collective"]
                    and e["bytes"] == row["bytes"]) for records in per_rank]
        slowest = json.loads(row["times_s"])
        assert slowest == [max(a, b) for a, b in zip(*raw)] and len(slowest) == 3
        factor = {"allreduce": 1.0, "broadcast": 1.0, "allgather": 0.5}[row["collective"]]
        assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * factor)
        assert row["algbw_GBps"] == pytest.approx(row["bytes"] / row["time_p50_s"] / 1e9)
        assert row["launcher"] == "torchrun" and row["world_size"] == 2 and row["launch_s"] > 0
    table = comm_results.load(tmp_path)
    assert len(table) == len(rows) and set(table["schema_version"]) == {comm_results.COMM_SCHEMA_VERSION}


def test_comm_table_refuses_other_schema_versions(tmp_path):
    frame = comm_results.to_frame([{"schema_version": 99, "backend": "gloo", "status": "ok"}])
    frame.to_parquet(tmp_path / comm_results.PARQUET, index=False)
    with pytest.raises(UserError, match="comm schema versions"):
        comm_results.load(tmp_path)
    with pytest.raises(ValueError, match="not in the comm schema"):
        comm_results.to_frame([{"bandwidth": 1}])


def test_comm_report_without_results_is_one_line(tmp_path, capsys):
    from harness.cli import main as cli

    assert cli.main(["comm", "--report", "--results", str(tmp_path)]) == 2
    assert "no comm results yet" in capsys.readouterr().err


def test_measured_window_records_its_wall_clock_start(tmp_path):
    import time

    from harness.contract.events import EventWriter, read_rank
    from harness.contract.measure import run_measured_loop

    events = EventWriter(tmp_path, 0)
    before = time.time()
    run_measured_loop(lambda: 0.0, sync=lambda: None, barrier=lambda: None, warmup_steps=1, measured_steps=2,
                      samples_per_step=4, events=events)
    after = time.time()
    events.close()
    window = read_rank(tmp_path, 0).window
    assert before <= window["start_time"] <= after and window["steps"] == 2
