"""Per-rank event records: the workers' half of the contract with the harness.

Each rank appends JSON lines to ``events-rank<R>.jsonl`` in the run's folder,
flushing every line, so that a crash loses at most the line being written and
the harness can show progress while the run goes on. Times are in seconds.

Records (``event`` field):
  ``hello``   format, rank, world_size, device, versions, host facts of the rank; a rank that runs no
              training steps itself (a parameter-server cluster's coordinator or server) says ``trains``
              false (and its ``role``): it has no step records, and only a window it reports counts
  ``step``    phase ("warmup" | "measure"), index, seconds, samples
  ``window``  seconds (the rank's measured wall time), samples, steps, start_time and
              end_time (Unix seconds, to place telemetry samples)
  ``losses``  values: the loss of every measured step (read after the window)
  ``eval``    step (1-based, warm-up included), accuracy (fraction), loss: a held-out evaluation
  ``comm``    bytes_per_step (payload this rank handed to collectives, mean over measured steps),
              dense_bytes_per_step (what fp32 gradient allreduce would send)
  ``staleness`` values: per update of this rank in the measured window, the updates other ranks applied
              between its read of the model and its own update (asynchronous strategies)
  ``server``  bytes_in_per_step, bytes_out_per_step: payload a parameter-server shard hosted by this rank
              took in and sent out, per measured step of this rank
  ``emulation`` an emulated accelerator's steps (device emulated): accelerator, compute_s (profiled, per
              step), slept_s (the sleeps' measured total in the window), au (compute / window time),
              host_cpu_busy (machine's CPU busy fraction in the window), loader_busy (the rank's loader
              processes' CPU seconds / (window x workers)); with real gradients also late_s, dilation, the
              links, and where the exchange runs after the backward exchange_s (its mean dilated time a
              step) and exchange_cpu_busy (the machine's CPU busy fraction during it)
  ``checkpoint`` mode (single | sharded), bytes_written, bytes_read, save_s, load_s (this rank's part,
              from the phase's starting barrier), cache_defeat (how the page cache was kept out)
  ``memory``  gpu_allocated_mb, gpu_reserved_mb: the most accelerator memory the rank's framework had
              allocated to tensors and reserved from the device (its caching allocator) up to the window's end
              (MiB); written by workers on an accelerator
  ``end``     weights_checksum, extra facts (e.g. parameter count, final_accuracy)
  ``skip``    reason: the worker found it cannot run this combination here (not a failure)
  ``error``   time (Unix seconds), message (an exception in the worker)
  ``compile`` seconds: the first step, which compiled the model, before warm-up
  ``plain``   seconds, samples, steps: the same loop without the distributed wrapper on one device
              (world size 1), timed like the window after its own warm-up: the single-device baseline
  ``exit``    time, code (exit status) or signal (its name), peak_rss_mb (the peak resident memory of the
              worker's largest process, MiB): written by the rank's supervisor (harness.contract.worker)
              after the worker process ended
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

EVENTS_FORMAT = 1
HOST_VARIABLE = "ROSETTA_HOST"  # set by launchers whose hosts share a host name (network namespaces)
IMAGE_VARIABLE = "ROSETTA_IMAGE"  # set by the images built from docker/ (and by the kubernetes, podman launchers)
# Written into the run's folder by a launcher that knows the image it ran (podman): {"image", "id", "digest"},
# the row's image, image_id and image_digest, kept even for a run whose ranks never started.
IMAGE_FILE = "image.json"


def events_path(out_dir: Path, rank: int) -> Path:
    return Path(out_dir) / f"events-rank{rank}.jsonl"


class EventWriter:
    """Appends one rank's records; each line is flushed to the OS when written."""

    def __init__(self, out_dir: Path, rank: int):
        self.rank = rank
        self.out_dir = Path(out_dir)  # the run's folder, which every rank of the run sees
        self._fh = open(events_path(out_dir, rank), "a", buffering=1)
        # told each record's name once it is written (the worker's end watch, set after the writer exists)
        self.on_event: Callable[[str], None] | None = None

    def emit(self, event: str, **fields: Any) -> None:
        self._fh.write(json.dumps({"event": event, **fields}) + "\n")
        if self.on_event is not None:
            self.on_event(event)

    def sync(self) -> None:
        """Every record written so far on the disk (the file stays open)."""
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def hello(self, world_size: int, device: str, versions: dict[str, str], **facts: Any) -> None:
        self.emit("hello", format=EVENTS_FORMAT, rank=self.rank, world_size=world_size, device=device,
                  versions=versions, pid=os.getpid(), host=os.environ.get(HOST_VARIABLE) or socket.gethostname(),
                  image=os.environ.get(IMAGE_VARIABLE), **facts)

    def close(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()


@dataclass
class RankRecord:
    """What one rank reported, read back by the harness."""

    rank: int
    hello: dict[str, Any] | None = None
    warmup_steps: list[float] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)  # measured steps only
    step_samples: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    window: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    evals: list[dict[str, Any]] = field(default_factory=list)  # held-out evaluations, in step order
    comm: dict[str, Any] | None = None
    staleness: list[int] | None = None  # asynchronous strategies: per update in the window
    server: dict[str, Any] | None = None  # a parameter-server shard's bytes (``server`` record)
    data: dict[str, Any] | None = None  # input pipeline facts of a real-data run (``data`` record)
    emulation: dict[str, Any] | None = None  # an emulated accelerator's facts (``emulation`` record)
    checkpoint: dict[str, Any] | None = None  # the checkpoint phase (``checkpoint`` record)
    memory: dict[str, Any] | None = None  # accelerator memory peaks (``memory`` record)
    ddp_timing: dict[str, Any] | None = None  # DDP's own per-step compute and communication times
    pass_timing: dict[str, Any] | None = None  # the same, timed by a framework's own code (Horovod, Chainer)
    link_probe: dict[str, Any] | None = None  # a host's first rank: its link timed against each other host's
    skip: str | None = None
    errors: list[str] = field(default_factory=list)
    error_time: float | None = None  # Unix seconds of the first error record
    exit: dict[str, Any] | None = None
    compile_s: float | None = None
    plain: dict[str, Any] | None = None  # the single-device loop without the wrapper (``plain`` record)

    @property
    def trains(self) -> bool:
        """Whether this rank runs training steps (false: a coordinator or server, per its hello)."""
        return bool((self.hello or {}).get("trains", True))

    @property
    def failure_time(self) -> float:
        """When this rank first went wrong (Unix seconds; infinity if it never said)."""
        times = [t for t in (self.error_time, (self.exit or {}).get("time")) if t is not None]
        return min(times, default=float("inf"))


def read_rank(out_dir: Path, rank: int) -> RankRecord:
    """Read a rank's records; a missing file or a torn last line is tolerated."""
    record = RankRecord(rank)
    path = events_path(out_dir, rank)
    if not path.exists():
        return record
    for line in path.read_text().splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a crash
        kind = ev.get("event")
        if kind == "hello":
            record.hello = ev
        elif kind == "step" and ev.get("phase") == "warmup":
            record.warmup_steps.append(ev["seconds"])
        elif kind == "step":
            record.step_seconds.append(ev["seconds"])
            record.step_samples.append(ev["samples"])
        elif kind == "losses":
            record.losses = list(ev["values"])
        elif kind == "window":
            record.window = ev
        elif kind == "end":
            record.end = ev
        elif kind == "eval":
            record.evals.append(ev)
        elif kind == "comm":
            record.comm = ev
        elif kind == "staleness":
            record.staleness = list(ev["values"])
        elif kind == "server":
            record.server = ev
        elif kind in ("data", "emulation", "checkpoint", "memory", "ddp_timing", "pass_timing",
                      "link_probe"):
            setattr(record, kind, ev)
        elif kind == "skip":
            record.skip = ev.get("reason", "")
        elif kind == "error":
            record.errors.append(ev.get("message", ""))
            if record.error_time is None:
                record.error_time = ev.get("time")
        elif kind == "exit":
            record.exit = ev
        elif kind == "compile":
            record.compile_s = ev["seconds"]
        elif kind == "plain":
            record.plain = ev
    return record


def latest_step(out_dir: Path, rank: int = 0) -> dict[str, Any] | None:
    """The last step record of a rank (for live progress), read from the file's tail."""
    path = events_path(out_dir, rank)
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - 4096))
            lines = fh.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev.get("event") == "step":
            return ev
    return None
