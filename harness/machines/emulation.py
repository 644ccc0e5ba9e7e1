"""An emulated accelerator's measured window, framework-free (device emulated; no deep-learning import here).

Each framework's emulated worker (``frameworks/*/emulated_device.py``, through ``frameworks/shared/emulated_rank.py``,
which adds the checkpoint phase and the end record) brings what is its own: the rank's real
batches through its input pipeline (``next_batch``, timed by the pipeline's stall meter) and a barrier
across ranks through its communication library, which stands in for the gradient allreduce. This module
runs the rest the same way for all of them: each step fetches a batch, sleeps the profiled compute time
(:class:`harness.machines.accelerators.EmulatedStep`) and barriers; after the window the ``emulation``
record (AU, the sleeps, the CPU the window used) and the ``data`` record.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import psutil

from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec
from harness.machines.accelerators import EmulatedStep


def busy_and_total_s(before: Any, after: Any) -> tuple[float, float]:
    """The machine's busy and total CPU seconds (every core) between two ``psutil.cpu_times()`` readings;
    waiting for I/O counts as idle."""
    total = sum(after) - sum(before)
    idle = (after.idle + getattr(after, "iowait", 0)) - (before.idle + getattr(before, "iowait", 0))
    return total - idle, total


class CpuWindow:
    """CPU use over the measured window: the machine's busy fraction (every process, other users' too)
    and this rank's loader processes' CPU seconds (its children: DataLoader workers, a Chainer
    MultiprocessIterator's pool)."""

    def __init__(self):
        self.start: tuple[Any, float] | None = None

    @staticmethod
    def _loader_cpu_s() -> float:
        total = 0.0
        for child in psutil.Process().children(recursive=True):
            try:
                times = child.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass  # a worker that ended between the listing and the reading
        return total

    def begin(self) -> None:
        self.start = (psutil.cpu_times(), self._loader_cpu_s())

    def end(self, window_s: float, loader_processes: int) -> dict[str, float | None]:
        """``loader_busy`` is the children's CPU / (window x ``loader_processes``); None without loader
        processes (none, or a loader that runs as threads inside the rank, whose CPU cannot be told apart
        from the rank's own)."""
        machine0, loader0 = self.start
        busy, total = busy_and_total_s(machine0, psutil.cpu_times())
        loader_s = self._loader_cpu_s() - loader0
        return {"host_cpu_busy": busy / total if total > 0 else None,
                "loader_busy": (loader_s / (window_s * loader_processes)
                                if loader_processes and window_s > 0 else None)}


def hello_facts(spec: RunSpec) -> dict[str, Any]:
    """An emulated accelerator's device facts for its rank's hello record: no GPU, the profile's accelerator."""
    return {"gpu_model": None, "gpu_count": 0, "accelerator": spec.emulation["accelerator"]}


def run_window(spec: RunSpec, events: EventWriter, next_batch: Callable[[], Any], barrier: Callable[[], None],
               meter: Any, loader_processes: int) -> dict[str, float]:
    """Warm-up and measured steps of one emulated accelerator: each a real batch (``next_batch``), the
    profiled compute slept, a barrier across ranks. Emits the ``emulation`` record and, with a stall
    meter (``frameworks.shared.image_input.StallMeter``; None for synthetic data), the ``data`` record; returns
    the window. ``loader_processes``: the rank's loader processes (children) for ``loader_busy``, 0
    where there are none or the loader runs as threads in the rank (tf.data)."""
    emulation = dict(spec.emulation)
    compute = EmulatedStep(emulation)
    cpu = CpuWindow()
    note_meter = meter.between_steps(spec.warmup_steps) if meter else (lambda done: None)
    spent_at_window = [0.0]

    run_clock: list[float] = []  # MLPerf Storage's count: the first step's start and end, from step 1 on

    def between_steps(done: int) -> None:
        note_meter(done)
        if done == 1:
            run_clock.append(time.perf_counter())
        if done == spec.warmup_steps:
            cpu.begin()
            spent_at_window[0] = compute.spent_s

    if spec.warmup_steps == 0:
        between_steps(0)

    def step() -> None:
        if not run_clock:
            run_clock.append(time.perf_counter())
        next_batch()
        compute()
        barrier()  # the allreduce's synchronization, without its bytes

    window = run_measured_loop(step, sync=lambda: None, barrier=barrier, warmup_steps=spec.warmup_steps,
                               measured_steps=spec.measured_steps, samples_per_step=spec.batch_per_worker,
                               events=events, loss_value=None, between_steps=between_steps)
    run_end = time.perf_counter()
    used = cpu.end(window["seconds"], loader_processes if meter else 0)
    compute_s = float(emulation["compute_s"])
    events.emit("emulation", accelerator=emulation["accelerator"], compute_s=compute_s,
                slept_s=compute.spent_s - spent_at_window[0],
                au=compute_s * spec.measured_steps / window["seconds"], au_threshold=emulation["au_threshold"],
                step=emulation["step"], source=emulation["source"],
                # every step from step 1 (warm-up included), as MLPerf Storage counts: seconds from the first
                # step's start to the last's end, and the first step's own (its AU leaves that step out)
                run_steps=spec.warmup_steps + spec.measured_steps, run_s=run_end - run_clock[0],
                first_step_s=run_clock[1] - run_clock[0], **used)
    if meter is not None:
        events.emit("data", **meter.record(window, spec.measured_steps))
    return window
