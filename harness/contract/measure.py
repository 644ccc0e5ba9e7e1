"""The measured training loop every framework's worker uses (no framework imported here).

The window of a rank starts after warm-up, after a barrier across ranks and a
device synchronization, and ends after the last measured step's device
synchronization. Every step is timed with the device synchronized before the
clock is read, and recorded raw.

Fault injection (for testing regression detection, never for real measurements):
the environment variable ``ROSETTA_INJECT_SLOWDOWN`` = F (a fraction, e.g. 0.1)
makes every rank sleep F x each measured step's own time after that step, so the
run is really (1 + F) times slower in measured wall time. The value is written to
the rank's ``window`` record (``injected_slowdown``) and its log, so a slowed run
is never mistaken for a real one.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

from harness.contract.events import EventWriter

INJECT_SLOWDOWN_ENV = "ROSETTA_INJECT_SLOWDOWN"


def injected_slowdown(env: dict[str, str] | None = None) -> float:
    """The planted slowdown fraction from ``ROSETTA_INJECT_SLOWDOWN`` (0.0 when unset)."""
    raw = (os.environ if env is None else env).get(INJECT_SLOWDOWN_ENV, "").strip()
    if not raw:
        return 0.0
    value = float(raw)
    if not 0.0 <= value <= 10.0:
        raise ValueError(f"{INJECT_SLOWDOWN_ENV} must be a fraction in 0..10, got {raw!r}")
    return value


def run_measured_loop(
    step: Callable[[], Any],
    *,
    sync: Callable[[], None],
    barrier: Callable[[], None],
    warmup_steps: int,
    measured_steps: int,
    samples_per_step: int,
    events: EventWriter,
    loss_value: Callable[[Any], float] | None = float,
    between_steps: Callable[[int], None] | None = None,
    device_memory: Callable[[], dict[str, float]] | None = None,
) -> dict[str, float]:
    """Run warm-up then measured steps; return this rank's window (seconds, samples, steps).

    ``step`` runs one training step and returns its loss (any object; converted by
    ``loss_value`` only after the window, so no extra device sync is added inside it); with
    ``loss_value`` None the steps have no loss (an emulated accelerator) and none is recorded.
    ``samples_per_step`` is this rank's batch size. ``between_steps(n)``, if given, is called
    after the n-th step (1-based, warm-up steps included), e.g. to evaluate the model; its time
    is kept out of the step times and out of the window. ``device_memory()``, if given, answers the
    accelerator memory this rank's framework has held at most so far (``gpu_allocated_mb`` and
    ``gpu_reserved_mb``, MiB): read after the window into a ``memory`` record.
    """
    clock = time.perf_counter
    slowdown = injected_slowdown()
    if slowdown:
        print(f"rosetta: {INJECT_SLOWDOWN_ENV}={slowdown}: every measured step is slowed on purpose",
              file=sys.stderr, flush=True)
    _warm_up(step, sync, warmup_steps, samples_per_step, events, between_steps)
    barrier()
    sync()
    losses = []
    window_start, wall_start = clock(), time.time()
    t_prev = window_start
    paused = 0.0  # seconds spent in between_steps inside the window
    for index in range(measured_steps):
        losses.append(step())
        sync()
        if slowdown:  # planted fault: lengthen this step by a fraction of its own time
            time.sleep(slowdown * (clock() - t_prev))
        t_now = clock()
        events.emit("step", phase="measure", index=index, seconds=t_now - t_prev, samples=samples_per_step)
        if between_steps is not None:
            t_pause = clock()
            between_steps(warmup_steps + index + 1)
            sync()
            paused += clock() - t_pause
        t_prev = clock()  # the record above is bookkeeping: keep it out of the next step's time
    window_end = clock()
    window = {"seconds": window_end - window_start - paused, "samples": samples_per_step * measured_steps,
              "steps": measured_steps, "start_time": wall_start, "end_time": time.time()}
    if slowdown:
        window["injected_slowdown"] = slowdown
    events.emit("window", **window)
    events.emit("losses", values=[loss_value(v) for v in losses] if loss_value is not None else [])
    if device_memory is not None:
        events.emit("memory", **device_memory())
    return window


def _warm_up(step: Callable[[], Any], sync: Callable[[], None], warmup_steps: int, samples_per_step: int,
             events: EventWriter, between_steps: Callable[[int], None] | None) -> None:
    """The warm-up steps before the window, each timed and recorded (phase ``warmup``)."""
    clock = time.perf_counter
    for index in range(warmup_steps):
        t0 = clock()
        step()
        sync()
        events.emit("step", phase="warmup", index=index, seconds=clock() - t0, samples=samples_per_step)
        if between_steps is not None:
            between_steps(index + 1)
