"""The per-rank attribution names the rank, host and phase a planted slowdown is in, from rank records."""

from __future__ import annotations

import pytest

from harness.contract.events import RankRecord
from harness.results.attribution import attribute

STEPS = 10


def _rank(rank: int, *, compute: float = 0.08, data: float = 0.0, comm: float = 0.01, step: float | None = None,
          timed: bool = True) -> RankRecord:
    """A rank of a synchronous run whose step is the slowest rank's ready time + comm (seconds per step)."""
    record = RankRecord(rank, hello={"rank": rank, "host": f"host{rank // 2}"})
    record.step_seconds = [step if step is not None else compute + data + comm + 0.005] * STEPS
    if timed:
        record.ddp_timing = {"steps": [{"forward_compute_s": compute / 3, "backward_compute_s": 2 * compute / 3,
                                        "backward_comm_s": comm + 0.002, "overlap_s": 0.002}] * STEPS}
    if data:
        record.data = {"data_wait_s": data * STEPS, "window_s": STEPS * record.step_seconds[0]}
    return record


def _run(slow: int, *, compute: float = 0.08, data: float = 0.0, timed: bool = True) -> list[RankRecord]:
    """Four ranks; rank ``slow`` takes ``compute`` and ``data``, the others 0.08 s of compute, and every rank's
    step lasts as long as the slowest one's (the exchange waits for it)."""
    step = max(compute + data, 0.08) + 0.015
    ranks = []
    for r in range(4):
        mine = (compute, data) if r == slow else (0.08, 0.0)
        comm = step - 0.005 - mine[0] - mine[1]
        ranks.append(_rank(r, compute=mine[0], data=mine[1], comm=comm, timed=timed))
    return ranks


def test_a_slow_compute_rank_is_named_with_its_host_and_phase():
    result = attribute(_run(2, compute=0.10))
    assert (result.slowest.rank, result.slowest.host, result.phase) == (2, "host1", "compute")
    assert result.straggler_score == pytest.approx(0.115 / 0.095, rel=1e-6)  # own: step - peer wait
    fast = result.ranks[0]
    assert fast.peer_wait == pytest.approx(0.02) and fast.exchange == pytest.approx(0.01)


def test_a_slow_loader_is_named_as_data():
    result = attribute(_run(3, data=0.03))
    assert (result.slowest.rank, result.phase) == (3, "data")
    assert result.row_fields()["slowest_data_s"] == pytest.approx(0.03)
    assert result.row_fields()["median_data_s"] == pytest.approx(0.0)


def test_untimed_ranks_still_name_a_slow_loader_and_leave_compute_unknown():
    result = attribute(_run(1, data=0.03, timed=False))
    assert (result.slowest.rank, result.phase) == (1, "data")
    assert all(r.compute is None for r in result.ranks)


def test_a_run_without_a_straggler_scores_one():
    result = attribute(_run(0))
    assert result.straggler_score == pytest.approx(1.0)


def test_the_table_has_a_row_per_rank_whose_phases_add_up_to_the_step():
    result = attribute(_run(2, compute=0.12))
    rows = result.table()
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    for row in rows:
        parts = row["compute_s"] + row["peer_wait_s"] + row["exchange_s"] + row["data_s"] + row["rest_s"]
        assert parts == pytest.approx(row["step_s"])


def _late_outside_compute(slow: int, late: float) -> list[RankRecord]:
    """Four ranks of equal compute; rank ``slow`` spends ``late`` s a step where no timer sees it (an injected
    sleep, a CPU hog), so the others' exposed exchange grows by it, and every step lasts as long."""
    step = 0.08 + 0.01 + late + 0.005
    return [_rank(r, comm=0.01 if r == slow else 0.01 + late, step=step) for r in range(4)]


def test_a_rank_late_outside_compute_is_named_and_the_others_wait_for_it():
    result = attribute(_late_outside_compute(1, 0.03))
    assert (result.slowest.rank, result.phase) == (1, "rest")
    for r in result.ranks:  # the wire's own time is the least exposed exchange; the rest of it was waiting
        assert r.exchange == pytest.approx(0.01)
        assert r.peer_wait == pytest.approx(0.0 if r.rank == 1 else 0.03)
    assert result.straggler_score == pytest.approx(0.125 / 0.095, rel=1e-6)


def test_a_wait_in_ddps_forward_buffer_broadcast_is_peer_wait_not_compute():
    """Rank 3 is late before its forward (a CPU hog's host work after the update): the others wait for it in
    the buffers' broadcast that begins DDP's forward, inside its timer; their forward / backward ratio grows,
    a slow GPU's does not."""
    ranks = _late_outside_compute(3, 0.03)
    for r in ranks:
        if r.rank != 3:  # the wait moves from the exchange into the forward
            r.ddp_timing = {"steps": [{**s, "forward_compute_s": s["forward_compute_s"] + 0.03,
                                       "backward_comm_s": s["backward_comm_s"] - 0.03} for s in r.ddp_timing["steps"]]}
    result = attribute(ranks)
    assert (result.slowest.rank, result.phase) == (3, "rest")
    assert all(r.compute == pytest.approx(0.08) for r in result.ranks)
    assert [r.peer_wait for r in result.ranks] == pytest.approx([0.03, 0.03, 0.03, 0.0])
    slow_gpu = attribute(_run(1, compute=0.12))  # forward and backward both 1.5 x: no forward wait
    assert slow_gpu.slowest.compute == pytest.approx(0.12) and slow_gpu.phase == "compute"


def test_a_slow_wire_for_everyone_is_exchange_not_peer_wait():
    result = attribute([_rank(r, comm=0.05) for r in range(4)])
    assert all(r.peer_wait == pytest.approx(0.0) and r.exchange == pytest.approx(0.05) for r in result.ranks)
    assert result.straggler_score == pytest.approx(1.0)


def test_an_emulated_host_loader_wait_is_data_not_compute():
    ranks = _run(0)
    for r in ranks:  # every step 0.02 s longer: the exchange waits for the slow loader's rank
        r.step_seconds = [t + 0.02 for t in r.step_seconds]
    slow = ranks[2]  # its emulated loader held each forward 0.02 s (DDP's forward timer saw it as compute)
    slow.ddp_timing = {"steps": [{**s, "forward_compute_s": s["forward_compute_s"] + 0.02}
                                 for s in slow.ddp_timing["steps"]]}
    slow.window = {"seconds": STEPS * slow.step_seconds[0]}
    slow.emulation = {"input_stall": 0.02 / slow.step_seconds[0]}
    for r in ranks:
        if r is not slow:
            r.ddp_timing = {"steps": [{**s, "backward_comm_s": s["backward_comm_s"] + 0.02}
                                      for s in r.ddp_timing["steps"]]}
    result = attribute(ranks)
    assert (result.slowest.rank, result.phase) == (2, "data")
    assert result.slowest.compute == pytest.approx(0.08) and result.slowest.data == pytest.approx(0.02)


def test_one_rank_has_no_attribution():
    assert attribute(_run(0)[:1]) is None
