"""The clocks of an emulated accelerator with real gradients, the same in every framework (device emulated,
``exchange = "gradients"``: harness/machines/emulated_cluster.py; no deep-learning import here).

An emulated rank does none of its model's math: it sleeps the profiled step, dilated by the run's k, and
hands the framework's own data-parallel machinery gradients of the real model's shapes when a GPU would
have made them. Where the gradients are ready depends on the framework: PyTorch's autograd hands DDP and
Horovod each layer's as its backward ends, as TensorFlow's executor hands Horovod TensorFlow's
(:class:`LayerClock`, driven by frameworks/shared/pytorch/emulated_gradients.py and
frameworks/horovod_tf/emulated_gradients.py); TensorFlow's MultiWorkerMirroredStrategy and ChainerMN
exchange them all after the whole backward, which :class:`StepClock` stands in for (the passes' sleep,
then the framework's exchange, timed, then the update's sleep). Both wait first for the step's batch from the
emulated host's loader where the run has one (:class:`InputClock`). :class:`Watch` writes the rank's ``emulation``
record for both.

Every sleep aims at a deadline from its pass's start, so a late wake-up is caught up and the time behind
schedule (``late_s``: this machine's CPU was short) is counted.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any, Callable, Mapping, Protocol, TypeVar

import psutil

from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.machines import faults
from harness.machines.emulation import CpuWindow, busy_and_total_s

GRADIENT_VALUE = 1e-4  # every emulated gradient's entries (their values are not what is measured)
FORWARD_SHARE = 1 / 3  # of a training step's compute: the backward takes twice the forward (model_flops)


class Schedule:
    """Deadlines of one pass (s from its start, dilated, x the step's factor) and the time the pass ran
    behind them."""

    def __init__(self, offsets: list[float]):
        self.offsets = offsets
        self.start = 0.0
        self.factor = 1.0
        self.late_s = 0.0
        self.held_s = 0.0  # s (dilated) the pass's work waited for what it needed (hold)

    def begin(self, factor: float = 1.0) -> None:
        """The pass starts now; ``factor``: this step's multiple of the profiled time (StepFactors)."""
        self.start, self.factor = time.perf_counter(), factor

    def wait(self, index: int) -> None:
        """Sleep until deadline ``index`` (none when already past it: counted as late at the pass's end)."""
        remaining = self.start + self.offsets[index] * self.factor - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)
        elif index == len(self.offsets) - 1:
            self.late_s -= remaining  # behind at the pass's end: what the CPU could not keep up with

    def hold(self, index: int, ready_at: float) -> None:
        """The work from deadline ``index`` - 1 on (the pass's start for 0) cannot begin before ``ready_at``
        (perf_counter s: a sharded layer's parameters gathered): the deadlines from there on move later by as
        much as it comes after that deadline, which is waiting, not running late."""
        begins = self.start + (self.offsets[index - 1] * self.factor if index > 0 else 0.0)
        if ready_at > begins:
            self.start += ready_at - begins
            self.held_s += ready_at - begins

    def run(self, during: Callable[[], None] = lambda: None, factor: float = 1.0) -> None:
        """The whole pass at once: begin, ``during`` (work the pass's time includes), then wait for its
        last deadline."""
        self.begin(factor)
        during()
        self.wait(len(self.offsets) - 1)


class StepFactors:
    """Each step's multiple of the profiled time on one rank: drawn from the profile's measured variation
    (``step_factors`` of the run's ``emulation`` mapping, mean 1; harness.machines.accelerators), each rank
    its own sequence from the run's seed, so that ranks straggle independently and a run repeats its draws.
    Without a variation every step is 1. A fault planted on the rank's GPU multiplies it (harness.machines.faults)."""

    def __init__(self, emulation: Mapping[str, Any], seed: int, rank: int):
        self.factors = [float(f) for f in emulation.get("step_factors") or (1.0,)]
        self.random = random.Random(f"{seed}/{rank}")
        self.emulation, self.rank, self.steps = emulation, rank, 0
        self.gpus = int(emulation.get("gpus_per_rank", 1))  # a process standing for G GPUs of its host

    def draw(self) -> float:
        """This step's factor; a process standing for G GPUs takes the slowest of G draws (its in-host
        reduction waits for the last of them, as a host's GPUs' would)."""
        self.steps += 1
        drawn = max(self.random.choice(self.factors) for _ in range(self.gpus))
        return drawn * faults.compute_factor(self.emulation, self.rank, self.steps - 1)


def cumulative(durations: list[float]) -> list[float]:
    """Deadlines from durations (s): each the sum of those up to it."""
    total, out = 0.0, []
    for d in durations:
        total += d
        out.append(total)
    return out


def dilated_parts(emulation: Mapping[str, Any]) -> tuple[float, float]:
    """The dilated step's forward-and-backward and update parts (s) from a run's ``emulation`` mapping:
    ``compute_s`` (the profiled step) x ``dilation`` (k), split by ``update_share``."""
    step = float(emulation["compute_s"]) * float(emulation["dilation"])
    update_share = float(emulation.get("update_share", 0.0))
    return step * (1 - update_share), step * update_share


PREFETCH_FACTOR = 2  # PyTorch DataLoader's default: batches a worker may have asked of it, made or in the making


class InputClock:
    """The emulated host's input pipeline of one GPU, as PyTorch's DataLoader runs it: ``workers`` processes,
    batch j made whole by worker j mod ``workers`` and handed over in order; a worker starts a batch once it
    is free and once it has been asked for (the loader asks PREFETCH_FACTOR x ``workers`` batches ahead, and one
    more each time one is taken); a batch takes ``batch_s`` (dilated). :meth:`next` waits for the next batch,
    the time counted in ``wait_s``. The workers start with the first :meth:`next`, as a loader's iterator
    starts them when the loop begins (the warm-up steps take that first fill)."""

    def __init__(self, workers: int, batch_s: float, now: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep):
        self.workers, self.batch_s, self.now, self.sleep = workers, batch_s, now, sleep
        self.ready: list[float] = []  # each batch's time made
        self.taken: list[float] = []  # each batch's time handed over
        self.began = 0.0
        self.wait_s = 0.0  # s (dilated) the steps waited for batches so far

    @classmethod
    def of(cls, emulation: Mapping[str, Any], rank: int = 0) -> InputClock | None:
        """The clock of ``rank`` in a run's ``emulation`` mapping (harness.machines.accelerators; a slow loader
        planted on its host: harness.machines.faults.loader), None without an emulated host loader."""
        made = faults.loader(emulation, rank)
        if made is None:
            return None
        return cls(made[0], made[1] * float(emulation["dilation"]))

    def _made_at(self, j: int) -> float:
        """When batch ``j`` is made, from the batches before it (their times made and taken)."""
        ahead = PREFETCH_FACTOR * self.workers
        asked = self.taken[j - ahead] if j >= ahead else self.began
        free = self.ready[j - self.workers] if j >= self.workers else self.began
        return max(asked, free) + self.batch_s

    def next(self) -> None:
        now = self.now()
        if not self.ready:
            self.began = now
        ready = self._made_at(len(self.ready))
        self.ready.append(ready)
        if ready > now:
            self.sleep(ready - now)
            after = self.now()
            self.wait_s += after - now
            now = after
        self.taken.append(now)


class LayerClock:
    """An emulated step whose gradients arrive layer by layer, as a GPU's backward makes them: the forward
    waits for each layer's forward deadline (:meth:`forward`), the backward for each layer's backward
    deadline in reverse order (:meth:`backward`; position 0, the last layer, begins the pass), the update
    sleeps its share after the exchange (:meth:`update`). ``shares``: each layer's part of the step (they
    sum to 1), forward FORWARD_SHARE of it and backward the rest."""

    def __init__(self, shares: list[float], emulation: Mapping[str, Any], factors: StepFactors):
        passes, update = dilated_parts(emulation)
        self.forward_clock = Schedule(cumulative([s * passes * FORWARD_SHARE for s in shares]))
        self.backward_clock = Schedule(cumulative([s * passes * (1 - FORWARD_SHARE) for s in reversed(shares)]))
        self.update_clock = Schedule([update])
        self.input = InputClock.of(emulation, factors.rank)
        self.factors, self.factor, self.factor_sum = factors, 1.0, 0.0
        self.host_delay_s = faults.host_delay_s(emulation, factors.rank)  # a CPU hog planted on the host

    def start(self) -> None:
        """The step's forward begins, once the emulated host's loader has the batch; the step's factor is drawn."""
        if self.input is not None:
            self.input.next()
        self.factor = self.factors.draw()
        self.factor_sum += self.factor
        self.forward_clock.begin(self.factor)

    def forward(self, index: int) -> None:
        self.forward_clock.wait(index)

    def backward(self, position: int) -> None:
        if position == 0:
            self.backward_clock.begin(self.factor)
        self.backward_clock.wait(position)

    def hold(self, backward: bool, index: int, ready_at: float) -> None:
        """Layer ``index`` of the forward (or ``position`` of the backward) begins no sooner than ``ready_at``
        (Schedule.hold): FSDP's layers wait for their gathered parameters, which DDP's never do."""
        (self.backward_clock if backward else self.forward_clock).hold(index, ready_at)

    def update(self) -> None:
        self.update_clock.run(factor=self.factor)
        if self.host_delay_s:  # the host's own work, after the device's: no device timer sees it
            time.sleep(self.host_delay_s)

    @property
    def late_s(self) -> float:
        return self.forward_clock.late_s + self.backward_clock.late_s + self.update_clock.late_s


WAIT_POLL_S = 1e-4  # an emulated rank's period of polling its pending exchange (s of the emulated cluster's time)


def wait_poll_s(emulation: Mapping[str, Any]) -> float:
    """Seconds (real) between an emulated rank's polls of its pending exchange: WAIT_POLL_S x k, so that
    polling costs this machine's CPU per emulated step, not per real second. At a fixed 0.2 ms, 32 ranks at
    k = 128 woke 2,100 times a second each (the machine 86% busy; 80% with this); WAIT_POLL_S is under 0.1%
    of a step."""
    return WAIT_POLL_S * float(emulation["dilation"])


HOROVOD_CYCLE_TIME_MS = 1.0  # Horovod 0.28's default cycle time (HOROVOD_CYCLE_TIME, ms)
HOROVOD_GLOO_TIMEOUT_S = 30  # its default wait for a Gloo operation (HOROVOD_GLOO_TIMEOUT_SECONDS, s)


def horovod_environment(emulation: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """Horovod's own clocks dilated with the step: its background loop's cycle time (ms) and its Gloo
    operations' timeout (s) x k, so that a cycle is as short, and a timeout as long, beside a dilated step as
    beside a real one (its fusion threshold is in bytes: unchanged). Undilated, a ring step of 32 ranks at
    k = 64 outwaited Gloo's 30 s ("Timed out waiting 30000ms for recv operation")."""
    k = float(emulation["dilation"])
    cycle = float(environ.get("HOROVOD_CYCLE_TIME", HOROVOD_CYCLE_TIME_MS))
    timeout = float(environ.get("HOROVOD_GLOO_TIMEOUT_SECONDS", HOROVOD_GLOO_TIMEOUT_S))
    return {"HOROVOD_CYCLE_TIME": f"{cycle * k:g}", "HOROVOD_GLOO_TIMEOUT_SECONDS": str(math.ceil(timeout * k))}


T = TypeVar("T")


class StepClock:
    """An emulated step whose gradients all arrive at the backward's end: :meth:`passes` sleeps the forward
    and backward, :meth:`exchange` runs the framework's exchange of them, :meth:`update` sleeps the update's
    share (an update waits for the exchange, which therefore cannot hide behind it).

    The exchange is timed, and this machine's CPU over it: nothing else of the step runs beside it, so
    where the CPU was busy through it, this machine's copies and reductions, not the dilated links, set
    its time (``exchange_cpu_busy``), which the time over the whole window, mostly sleeps, would hide."""

    def __init__(self, emulation: Mapping[str, Any], factors: StepFactors):
        passes, update = dilated_parts(emulation)
        self.passes_clock, self.update_clock = Schedule([passes]), Schedule([update])
        self.host_delay_s = faults.host_delay_s(emulation, factors.rank)  # a CPU hog planted on the host
        self.exchange_s = 0.0  # the exchanges' wall time so far (s, dilated)
        self.exchange_cpu = [0.0, 0.0]  # the machine's busy and total CPU seconds over them
        self.input = InputClock.of(emulation, factors.rank)
        self.factors, self.factor, self.factor_sum = factors, 1.0, 0.0

    def passes(self, during: Callable[[], None] = lambda: None) -> None:
        """The forward and backward, once the emulated host's loader has the batch (the step's factor drawn);
        ``during``: making the gradients, inside their time as on a GPU."""
        if self.input is not None:
            self.input.next()
        self.factor = self.factors.draw()
        self.factor_sum += self.factor
        self.passes_clock.run(during, self.factor)

    def exchange(self, run: Callable[[], T]) -> T:
        before, start = psutil.cpu_times(), time.perf_counter()
        result = run()
        self.exchange_s += time.perf_counter() - start
        busy, total = busy_and_total_s(before, psutil.cpu_times())
        self.exchange_cpu[0] += busy
        self.exchange_cpu[1] += total
        return result

    def update(self) -> None:
        self.update_clock.run(factor=self.factor)
        if self.host_delay_s:  # the host's own work, after the device's: no device timer sees it
            time.sleep(self.host_delay_s)

    @property
    def late_s(self) -> float:
        return self.passes_clock.late_s + self.update_clock.late_s

    def exchange_state(self) -> tuple[float, float, float]:
        return self.exchange_s, *self.exchange_cpu


class Clocked(Protocol):
    late_s: float  # seconds (dilated) the rank's sleeps ran behind their deadlines so far
    factor_sum: float  # the steps' factors so far (StepFactors): the profiled steps the sleeps aimed at
    input: InputClock | None  # the emulated host's loader, if the run has one


class Watch:
    """The ``emulation`` record of an emulated rank with real gradients: the machine's CPU over the window
    (harness.machines.emulation.CpuWindow) and how far the rank's clock ran behind, beside the profile."""

    def __init__(self, spec: RunSpec, clock: Clocked):
        self.spec, self.clock = spec, clock
        self.cpu = CpuWindow()
        self.late_at_window = 0.0
        self.factors_at_window = 0.0
        self.input_at_window = 0.0
        self.exchange_at_window = (0.0, 0.0, 0.0)
        if spec.warmup_steps == 0:
            self.between_steps(0)

    def between_steps(self, done: int) -> None:
        if done == self.spec.warmup_steps:
            self.cpu.begin()
            self.late_at_window = self.clock.late_s
            self.factors_at_window = self.clock.factor_sum
            self.input_at_window = self._input_wait_s()
            if isinstance(self.clock, StepClock):
                self.exchange_at_window = self.clock.exchange_state()

    def around(self, between_steps: Callable[[int], None]) -> Callable[[int], None]:
        """``between_steps`` of the loop, with the window's start noted."""
        def both(done: int) -> None:
            between_steps(done)
            self.between_steps(done)
        return both

    def _input_wait_s(self) -> float:
        return self.clock.input.wait_s if self.clock.input is not None else 0.0

    def record(self, events: EventWriter, window: dict[str, float]) -> None:
        emulation, steps = self.spec.emulation, self.spec.measured_steps
        k, compute_s = float(emulation["dilation"]), float(emulation["compute_s"])
        late = self.clock.late_s - self.late_at_window
        apart = {}
        if isinstance(self.clock, StepClock):  # the exchange apart from the passes: its time and CPU
            wall, busy, total = (b - a for a, b in zip(self.exchange_at_window, self.clock.exchange_state()))
            # under a tenth of a CPU second the clock's ticks (10 ms) make the fraction noise
            apart = {"exchange_s": wall / steps, "exchange_cpu_busy": busy / total if total >= 0.1 else None,
                     "link_exchange_s": emulation.get("link_exchange_s")}
        if self.clock.input is not None:  # the window's share spent waiting for the emulated host's batches
            apart.update(input_workers=emulation.get("input_workers"), input_rate=emulation.get("input_rate"),
                         input_stall=(self._input_wait_s() - self.input_at_window) / window["seconds"])
        if emulation.get("fault"):
            apart["fault"] = emulation["fault"]  # the planted fault (harness.machines.faults), for the row
        # the profiled time the window's sleeps aimed at (s, undilated): the steps' factors x the profile's
        planned = compute_s * (self.clock.factor_sum - self.factors_at_window)
        events.emit("emulation", accelerator=emulation["accelerator"], compute_s=compute_s, planned_s=planned,
                    slept_s=planned - late / k, late_s=late, dilation=k, exchange=emulation["exchange"],
                    step_variation=emulation.get("step_variation"),
                    intra_link=emulation["intra_link"], inter_link=emulation["inter_link"],
                    gpus_per_rank=emulation.get("gpus_per_rank", 1), gradient_scale=emulation.get("gradient_scale", 1),
                    au=compute_s * k * steps / window["seconds"], au_threshold=emulation["au_threshold"],
                    step=emulation["step"], source=emulation["source"], **self.cpu.end(window["seconds"], 0),
                    **apart)
