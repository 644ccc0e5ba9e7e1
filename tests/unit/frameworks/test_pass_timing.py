"""A framework's own pass timer: warm-up steps left out, DDP's keys, read back as the attribution reads DDP's."""

from __future__ import annotations

import pytest

from frameworks.shared.pass_timing import BACKWARD, EXCHANGE, FORWARD, PassTimer, timed_on
from harness.contract.events import EventWriter, read_rank
from harness.results.attribution import attribute


class Clock:
    """A clock the test moves (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _steps(timer: PassTimer, clock: Clock, count: int, forward: float = 0.002, backward: float = 0.004,
           exchange: float = 0.001) -> None:
    for _ in range(count):
        timer.start()
        for seconds, name in ((forward, FORWARD), (backward, BACKWARD), (exchange, EXCHANGE)):
            clock.now += seconds
            timer.lap(name)
        clock.now += 0.0005  # the update, after the exchange: not a pass
        timer.finish()


def test_warm_up_steps_are_left_out_and_each_pass_is_its_own_lap():
    clock = Clock()
    timer = PassTimer(warmup_steps=2, clock=clock)
    _steps(timer, clock, 2, forward=1.0)  # the warm-up's slow first steps
    _steps(timer, clock, 3)
    assert len(timer.steps) == 3
    for step in timer.steps:
        assert [step[FORWARD], step[BACKWARD], step[EXCHANGE]] == pytest.approx([0.002, 0.004, 0.001], abs=1e-9)
        assert step["overlap_s"] == 0.0


def test_a_step_missing_a_pass_is_not_kept_and_a_disabled_timer_keeps_nothing():
    clock = Clock()
    timer = PassTimer(warmup_steps=0, clock=clock)
    timer.start()
    timer.lap(FORWARD)
    timer.finish()
    off = PassTimer(warmup_steps=0, enabled=False, clock=clock)
    _steps(off, clock, 3)
    assert timer.steps == [] and off.steps == []
    assert timed_on("cpu") and timed_on("emulated") and not timed_on("cuda")


def test_the_record_is_read_back_and_a_slow_ranks_compute_is_named(tmp_path):
    for rank in range(3):
        writer = EventWriter(tmp_path, rank)
        writer.hello(3, "cpu", {})
        clock = Clock()
        timer = PassTimer(warmup_steps=1, clock=clock)
        slow = rank == 1  # its compute x3; the others wait for it in the exchange
        _steps(timer, clock, 4, forward=0.006 if slow else 0.002, backward=0.012 if slow else 0.004,
               exchange=0.001 if slow else 0.013)
        for index in range(3):  # every rank's step lasts the slow one's
            writer.emit("step", phase="measure", index=index, seconds=0.02, samples=1)
        timer.record(writer)
        writer.close()
    ranks = [read_rank(tmp_path, rank) for rank in range(3)]
    for rank in ranks:  # three hosts (one machine wrote them)
        rank.hello["host"] = f"host{rank.rank}"
    assert all(r.pass_timing and len(r.pass_timing["steps"]) == 3 for r in ranks)
    result = attribute(ranks)
    assert (result.slowest.rank, result.slowest.host, result.phase) == (1, "host1", "compute")
    assert all(t.compute is not None and t.compute > 0 for t in result.ranks)
    assert result.ranks[0].peer_wait == pytest.approx(0.012) and result.ranks[1].peer_wait == pytest.approx(0)
