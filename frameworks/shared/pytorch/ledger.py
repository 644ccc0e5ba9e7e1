"""What a PyTorch rank (DDP or Horovod, any strategy) records around its training loop: :class:`StepLedger`."""

from __future__ import annotations

from typing import Any, Callable

import torch

from frameworks.shared.image_input import StallMeter
from frameworks.shared.pytorch import digits, numerics
from frameworks.shared.pytorch.models import parameter_count
from frameworks.shared.pytorch.training import weights_checksum
from harness.contract.axes import Workload
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec


class StepLedger:
    """The bytes a rank's gradient exchange sent after each step, the input pipeline's counters when the
    window starts, the digits evaluations, then the window's data and comm records and the closing end record."""

    def __init__(self, spec: RunSpec, events: EventWriter, model: torch.nn.Module, meter: StallMeter | None,
                 data: Any, bytes_sent: Callable[[], int]):
        self.spec, self.events, self.model, self.meter, self.data = spec, events, model, meter, data
        self.bytes_sent = bytes_sent
        self.bytes_after = [0]  # cumulative bytes sent after each step (index = steps done)
        self.note_window = meter.between_steps(spec.warmup_steps) if meter else (lambda done: None)

    def between_steps(self, done: int) -> None:
        """After ``done`` steps (run_measured_loop's hook)."""
        self.bytes_after.append(self.bytes_sent())
        self.note_window(done)  # the input pipeline's counters when the measured window starts
        if self.spec.workload == Workload.DIGITS and done % int(self.spec.workload_options["eval_every"]) == 0:
            accuracy, loss = digits.evaluate(self.model, self.data)
            self.events.emit("eval", step=done, accuracy=accuracy, loss=loss)

    def after_window(self, window: Any, dense_bytes_per_step: int, **comm_facts: Any) -> None:
        """The data record (a loader-only pass after the window never competes with training) and the
        comm record: bytes per measured step, what a dense exchange of the gradients would send, and
        what a strategy adds (``comm_facts``: a pipeline's activation bytes and idle fraction)."""
        if self.meter is not None:
            self.events.emit("data", **self.meter.record(window, self.spec.measured_steps))
        measured = self.bytes_after[-1] - self.bytes_after[self.spec.warmup_steps]
        self.events.emit("comm", bytes_per_step=measured / self.spec.measured_steps,
                         dense_bytes_per_step=dense_bytes_per_step, **comm_facts)

    def end(self) -> None:
        """The end record: the weights' checksum (compared across ranks), parameters, layout, accuracy."""
        facts = {}
        if self.spec.workload == Workload.DIGITS:
            facts["final_accuracy"] = digits.evaluate(self.model, self.data)[0]
        self.events.emit("end", weights_checksum=weights_checksum(self.model),
                         parameters=parameter_count(self.model), layout=numerics.image_layout(self.model), **facts)
