"""PyTorch DDP's own timing of each measured step, as its reducer measures it: the forward's compute, the
backward's compute, the backward's communication and the time the two overlapped (seconds), one rank's
per step in a ``ddp_timing`` record. It tells apart what a step spent computing from what it waited for
the exchange, in the run itself (benchmarks/emulated_cluster_fidelity.py takes a real run's compute from it).

DDP keeps these for its first 10 iterations and then sampled ones (its runtime logging sample rate, 100 by
default). On the CPU the rate is set to 1, so that every step is timed; on a GPU it is left alone (reading
its CUDA events waits for them: every step would stall the queue it measures). A step's times are logged
at the next step's forward, so the record holds the measured steps that DDP timed, but the last.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.nn.parallel import DistributedDataParallel

from harness.contract.events import EventWriter

# DDP's logging keys (nanoseconds) and the record's (seconds)
KEYS = {"forward_compute_time": "forward_compute_s", "backward_compute_time": "backward_compute_s",
        "backward_comm_time": "backward_comm_s", "backward_compute_comm_overlap_time": "overlap_s"}


class DdpTiming:
    """Collects the DDP timing of the measured steps of a model that ``module`` wraps in DDP (else nothing)."""

    def __init__(self, module: nn.Module, warmup_steps: int, device_type: str):
        self.ddp = module if isinstance(module, DistributedDataParallel) else None
        self.warmup_steps = warmup_steps
        self.steps: dict[int, dict[str, float]] = {}  # by DDP's iteration number
        if self.ddp is not None and device_type == "cpu":
            self.ddp._set_ddp_runtime_logging_sample_rate(1)

    def between_steps(self, done: int) -> None:
        """After step ``done`` (1-based): step ``done - 1``'s times, once it is a measured one."""
        if self.ddp is None or done - 1 <= self.warmup_steps:
            return
        data: dict[str, Any] = self.ddp._get_ddp_logging_data()
        if all(key in data for key in KEYS):
            self.steps[int(data.get("iteration", done))] = {name: data[key] / 1e9 for key, name in KEYS.items()}

    def record(self, events: EventWriter) -> None:
        if self.steps:
            events.emit("ddp_timing", steps=[self.steps[i] for i in sorted(self.steps)])
