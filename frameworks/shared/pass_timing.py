"""A step's passes timed by a framework's own code, where no reducer times them as DDP's does
(frameworks/shared/pytorch/ddp_timing.py): the forward's compute, the backward's compute and the wait for the
exchange after the backward (seconds per step), in a ``pass_timing`` record with DDP's keys, so that the per-rank
attribution (harness/results/attribution.py) reads both alike and a slow rank is named in Horovod and Chainer
runs as in DDP's.

``backward_comm_s`` is the exchange's *exposed* time: what the rank waited for the averaged gradients after its
backward returned (Horovod's synchronize in the optimizer's step, ChainerMN's allreduce inside ``update``, with
the few element-wise operations of the update itself); ``overlap_s`` is 0, the part of the exchange hidden
under the backward being invisible to these timers. Timed on the CPU and on emulated accelerators only: on a GPU
each boundary would need a device synchronization, which serializes the very queue it measures.

Framework-free (``time`` only): any framework's worker may use it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from harness.contract.events import EventWriter

RECORD = "pass_timing"
FORWARD, BACKWARD, EXCHANGE = "forward_compute_s", "backward_compute_s", "backward_comm_s"


class PassTimer:
    """Laps of a step's passes; the first ``warmup_steps`` finished steps are left out (their compute is the
    warm-up's: first-touch allocation, caches)."""

    def __init__(self, warmup_steps: int, enabled: bool = True, clock: Callable[[], float] = time.perf_counter):
        self.enabled = enabled
        self._clock = clock  # seconds
        self._skip = warmup_steps
        self.steps: list[dict[str, float]] = []
        self._laps: dict[str, float] = {}
        self._since = 0.0

    def start(self) -> None:
        """The step's first pass begins now (after its batch was fetched: waiting for data is not compute)."""
        if self.enabled:
            self._laps, self._since = {}, self._clock()

    def lap(self, key: str) -> None:
        """The pass named ``key`` (FORWARD, BACKWARD or EXCHANGE) ended now."""
        if self.enabled:
            now = self._clock()
            self._laps[key] = now - self._since
            self._since = now

    def finish(self) -> None:
        """The step's passes are done: kept once the warm-up is over."""
        if not self.enabled:
            return
        if self._skip > 0:
            self._skip -= 1
        elif all(key in self._laps for key in (FORWARD, BACKWARD, EXCHANGE)):
            self.steps.append({**self._laps, "overlap_s": 0.0})

    def record(self, events: EventWriter) -> None:
        """The ``pass_timing`` record of the measured steps timed (none where nothing was)."""
        if self.steps:
            events.emit(RECORD, steps=self.steps)


def timed_on(device_kind: Any) -> bool:
    """Whether passes are timed on this device kind (``cpu``, ``emulated``; not a GPU: see the module)."""
    return str(device_kind) in ("cpu", "emulated")
