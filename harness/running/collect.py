"""Turn what a launch left behind (exit status, per-rank records, logs) into a row's fields."""

from __future__ import annotations

import collections
import json
import math
import signal
import statistics
from collections import deque
from pathlib import Path
from typing import Any

from harness.contract import machine_load, telemetry
from harness.contract.axes import Status
from harness.contract.events import IMAGE_FILE, RankRecord
from harness.contract.spec import RunSpec
from harness.contract.worker import log_path
from harness.machines import faults
from harness.results import metrics
from harness.results import attribution
from harness.running.emulation_fields import dilation, emulation_fields
from harness.running.execute import Outcome

REASON_MAX_CHARS = 600
ATTRIBUTION_FILE = attribution.FILE  # the per-rank table beside the events


def last_lines(path: Path, count: int = 3) -> list[str]:
    """The last non-empty lines of a log file (none if it does not exist)."""
    try:
        with open(path, errors="replace") as fh:
            return list(deque((line.rstrip() for line in fh if line.strip()), maxlen=count))
    except OSError:
        return []


SIGNAL_HINTS = {"SIGKILL": "SIGKILL, as the kernel's OOM killer sends", "SIGSEGV": "SIGSEGV, a segmentation fault",
                "SIGBUS": "SIGBUS, a bus error", "SIGABRT": "SIGABRT, an abort"}


def _log_tail(run_dir: Path, rank: RankRecord) -> str:
    tail = last_lines(log_path(run_dir, rank.rank), 2)
    return " / ".join(tail) if tail else "no output"


def _where(rank: RankRecord, spec: RunSpec | None = None) -> str:
    """How far a rank got; with ``spec``, out of how many steps of that phase."""
    if rank.hello is None:
        return "before it said hello"
    if rank.window is None and not rank.step_seconds:
        of = f" of {spec.warmup_steps}" if spec else ""
        return f"after {len(rank.warmup_steps)}{of} warm-up steps"
    of = f" of {spec.measured_steps}" if spec else ""
    return f"after measured step {len(rank.step_seconds)}{of}"


# Signals a launcher sends to stop the surviving ranks once one has failed: a consequence, not a cause.
STOP_SIGNALS = {"SIGTERM", "SIGINT", "SIGHUP"}


def rank_failure(run_dir: Path, rank: RankRecord) -> tuple[int, str] | None:
    """What went wrong on one rank, in words, with how likely it is the root cause (0 most).

    A death without an exception (a signal, an early exit) cannot be the consequence
    of another rank's failure, whereas an exception may be (a peer's closed
    connection), and a stop signal usually is (the launcher stopping survivors).
    None if the rank finished cleanly.
    """
    exit_ = rank.exit or {}
    signal = exit_.get("signal")
    if signal and signal not in STOP_SIGNALS:
        return 0, f"rank {rank.rank} killed by {SIGNAL_HINTS.get(signal, signal)}, {_where(rank)}"
    if rank.errors:
        return 1, f"rank {rank.rank}: {rank.errors[0]}"
    if rank.end is not None:
        return None
    if signal:
        return 2, f"rank {rank.rank} stopped by {signal} {_where(rank)}"
    if exit_.get("code") == 0:
        return 0, f"rank {rank.rank} exited with status 0 {_where(rank)}, before finishing"
    if rank.exit:
        return 0, f"rank {rank.rank} exited with status {exit_['code']} {_where(rank)}; {_log_tail(run_dir, rank)}"
    return 2, f"rank {rank.rank} left no exit record {_where(rank)}; {_log_tail(run_dir, rank)}"


def failure_story(run_dir: Path, ranks: list[RankRecord]) -> str:
    """Every rank's failure, the likely root cause first (then by time): one line."""
    failures = [(*found, rank.failure_time) for rank in ranks if (found := rank_failure(run_dir, rank))]
    if not failures:
        return "no rank reported a failure"
    failures.sort(key=lambda f: (f[0], f[2]))
    first, *rest = [text for _, text, _ in failures]
    return f"first: {first}" + (f"; then {'; '.join(rest)}" if rest else "")


def _timeout_state(run_dir: Path, rank: RankRecord, spec: RunSpec) -> str:
    """A rank's state when the run timed out: its own failure, or how far it had got."""
    failure = rank_failure(run_dir, rank)
    if failure and failure[0] < 2:  # not merely stopped by the harness's own SIGTERM
        return failure[1]
    if rank.hello is None:
        return f"rank {rank.rank} never said hello"
    return f"rank {rank.rank} still running {_where(rank, spec)}"


def _launcher_exit(code: int) -> str:
    if code < 0:
        return f"launcher killed by {signal_name(-code)}"
    return f"launcher exit code {code}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def status_and_reason(spec: RunSpec, outcome: Outcome, ranks: list[RankRecord],
                      run_dir: Path) -> tuple[Status, str | None]:
    """Decide the run's status; every status but ``ok`` comes with a one-line reason."""
    skipped = [r for r in ranks if r.skip is not None]
    if skipped and outcome.returncode == 0:
        return Status.SKIPPED, _clip(f"rank {skipped[0].rank}: {skipped[0].skip}")
    if outcome.setup_failure:
        return Status.FAILED, _clip(f"setup command exited with {outcome.returncode}: {outcome.setup_failure} "
                                    f"(see launcher.log)")
    if outcome.timed_out:
        where = "; ".join(_timeout_state(run_dir, r, spec) for r in ranks if r.end is None)
        where = where or "every rank had reported its end, the launch had not exited"
        return Status.TIMEOUT, _clip(f"no exit within {spec.timeout_s:g} s ({where})")
    if outcome.returncode != 0:
        if not any(r.hello or r.errors or r.exit for r in ranks):  # no rank got going: the launcher says why
            tail = " / ".join(last_lines(run_dir / "launcher.log", 3)) or "no output"
            return Status.FAILED, _clip(f"{_launcher_exit(outcome.returncode)} before any rank started; "
                                        f"launcher.log: {tail}")
        return Status.FAILED, _clip(f"{_launcher_exit(outcome.returncode)}; {failure_story(run_dir, ranks)}")
    if any(rank.end is None for rank in ranks):
        return Status.FAILED, _clip(f"launcher exit code 0 but not every rank finished; "
                                    f"{failure_story(run_dir, ranks)}")
    for rank in ranks:
        if rank.trains and (rank.window is None or not rank.step_seconds):
            return Status.FAILED, _clip(f"rank {rank.rank} measured nothing; {_log_tail(run_dir, rank)}")
    if not training(ranks):
        return Status.FAILED, "no rank ran a training step (every rank said it trains nothing)"
    checksums = {r.end["weights_checksum"] for r in ranks}
    if len(checksums) != 1:
        return Status.FAILED, "ranks hold different weights after training (checksums differ)"
    for rank in ranks:  # the convergence guard: a run that learns nothing gets no throughput
        problem = metrics.convergence_problem(rank.losses)
        if problem:
            return Status.DIVERGED, _clip(f"rank {rank.rank}: {problem}")
    return Status.OK, None


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_MAX_CHARS else text[: REASON_MAX_CHARS - 3] + "..."


def training(ranks: list[RankRecord]) -> list[RankRecord]:
    """The ranks that ran training steps (all but a parameter-server cluster's coordinator and servers)."""
    return [r for r in ranks if r.trains]


def measurement_fields(ranks: list[RankRecord], run_dir: Path) -> dict[str, Any]:
    """Throughput and step-time fields of a run whose every training rank reported a window. A rank that
    trains nothing adds its window if it reported one (a coordinator's, which spans every worker's steps)."""
    k = dilation(ranks)  # an emulated cluster's: its seconds are the measured ones / k
    per_step = [t / k for t in metrics.step_times([r.step_seconds for r in training(ranks)])]
    timed = [r for r in ranks if r.window]
    samples = [r.window["samples"] for r in timed]
    windows = [r.window["seconds"] / k for r in timed]
    losses = ranks[0].losses
    sampled = [(telemetry.read(run_dir, r.rank), r.window.get("start_time", math.inf),
                r.window.get("end_time", -math.inf)) for r in timed]
    return {
        **telemetry.summarize(sampled),
        **machine_load.summarize(sampled),
        "throughput": metrics.run_throughput(samples, windows),
        "samples_measured": sum(samples),
        "window_s": max(windows),
        "step_time_p50_s": metrics.percentile(per_step, 50),
        "step_time_p90_s": metrics.percentile(per_step, 90),
        "step_times_s": json.dumps(per_step),
        "first_loss": losses[0] if losses else math.nan,
        "last_loss": losses[-1] if losses else math.nan,
        **communication_fields(ranks),
        **asynchrony_fields(ranks),
        **memory_fields(ranks),
        **data_fields(ranks),
        **emulation_fields(ranks),
        **checkpoint_fields(ranks),
        **plain_fields(ranks),
        **attribution_fields(ranks, run_dir, k),
        **faults.fault_fields(ranks),
    }


def attribution_fields(ranks: list[RankRecord], run_dir: Path, dilation_k: float = 1.0) -> dict[str, Any]:
    """Where a multi-rank run's time went (harness.results.attribution): the row's straggler columns (seconds
    per step, an emulated cluster's undilated by ``dilation_k``), and every rank's breakdown kept beside the
    events in ``attribution.json`` (measured seconds). Empty for a run of fewer than two training ranks."""
    found = attribution.attribute(training(ranks))
    if found is None:
        return {}
    kept = {"format": attribution.FORMAT, "ranks": found.table(), "links": found.link_table()}
    (run_dir / ATTRIBUTION_FILE).write_text(json.dumps(kept, indent=1))
    return {name: value / dilation_k if name.endswith("_s") else value for name, value in found.row_fields().items()}


def plain_fields(ranks: list[RankRecord]) -> dict[str, Any]:
    """The single-device loop without the distributed wrapper (samples/s), where the worker measured it."""
    plain = ranks[0].plain if len(ranks) == 1 else None
    return {"plain_throughput": metrics.run_throughput([plain["samples"]], [plain["seconds"]])} if plain else {}


def data_fields(ranks: list[RankRecord]) -> dict[str, Any]:
    """Input-pipeline columns of a real-data run (empty for synthetic data): the worst rank's data stall,
    read rate and cache hit rate summed/averaged as their units say."""
    reported = [r.data for r in ranks if r.data]
    if not reported:
        return {}
    reads = sum(d["objects_read"] for d in reported)
    misses = [d["cache_misses"] for d in reported if d.get("cache_misses") is not None]
    tier = reported[0].get("tier_hit_bytes"), reported[0].get("tier_miss_bytes")  # the server's counters: rank 0's
    tier_rate = tier[0] / (tier[0] + tier[1]) if None not in tier and tier[0] + tier[1] > 0 else None
    staging = [d["staging_s"] for d in reported if d.get("staging_s") is not None]
    return {
        "data_stall_frac": max(d["data_wait_s"] / d["window_s"] for d in reported),
        "read_mb_s": sum(d["bytes_read"] for d in reported) / 1e6 / max(d["window_s"] for d in reported),
        "loader_throughput": sum(d["loader_samples_s"] for d in reported),
        "cache_hit_rate": tier_rate if tier_rate is not None else ((1 - sum(misses) / reads) if misses and reads else None),
        "objects_verified": sum(d["objects_verified"] for d in reported),
        "staging_s": max(staging) if staging else None,
        **partition_fields(reported),
    }


def partition_fields(reported: list[dict[str, Any]]) -> dict[str, Any]:
    """BERT's partitions read to their end in the window, every rank's together: how many, and the
    median and the longest seconds one took to load (reading only, frameworks/shared/pytorch/text_pipeline.py)
    and their bytes over those seconds (MB, 1e6, per second);
    empty where the pipeline does not time partitions (images, other frameworks)."""
    loads = [p for d in reported for p in d.get("partitions") or ()]
    if not any("partitions" in d for d in reported):
        return {}
    seconds = sorted(p["seconds"] for p in loads)
    return {"partitions_loaded": len(loads),
            "partition_load_s_p50": statistics.median(seconds) if seconds else None,
            "partition_load_s_max": seconds[-1] if seconds else None,
            "partition_load_mb_s": (sum(p["bytes"] for p in loads) / 1e6 / sum(seconds)
                                    if seconds and sum(seconds) > 0 else None)}


def communication_fields(ranks: list[RankRecord]) -> dict[str, Any]:
    """Bytes on the wire per step (the most any rank sent) and the compression ratio against
    fp32 gradient allreduce; empty for a worker that does not report them."""
    reported = [r.comm for r in ranks if r.comm]
    if not reported:
        return {}
    sent = max(c["bytes_per_step"] for c in reported)
    dense = reported[0]["dense_bytes_per_step"]
    # a strategy that sends nothing (Hogwild: one model in shared memory) has no ratio to speak of
    fields = {"bytes_per_step": sent, "compression_ratio": dense / sent if sent > 0 else None}
    return {**fields, **pipeline_fields(reported)}


def asynchrony_fields(ranks: list[RankRecord]) -> dict[str, Any]:
    """Staleness of every update in the window, all ranks together (mean, max, histogram), and the
    busiest parameter server's payload in and out per step; empty for a synchronous collective."""
    fields: dict[str, Any] = {}
    staleness = [s for r in ranks if r.staleness is not None for s in r.staleness]
    if staleness:
        counts = collections.Counter(staleness)
        fields.update(staleness_mean=sum(staleness) / len(staleness), staleness_max=max(staleness),
                      staleness_hist=json.dumps({str(k): counts[k] for k in sorted(counts)}))
    servers = [r.server for r in ranks if r.server]
    if servers:
        fields.update(server_bytes_in_per_step=max(s["bytes_in_per_step"] for s in servers),
                      server_bytes_out_per_step=max(s["bytes_out_per_step"] for s in servers))
    return fields


def pipeline_fields(reported: list[dict[str, Any]]) -> dict[str, Any]:
    """A pipeline's activation bytes (the most any stage sent), every stage's measured idle fraction
    beside GPipe's prediction, and the cut: each stage's layers and share of the forward FLOPs (where
    the worker reported them) and, cut by time, its share of the measured time; empty for the other
    strategies."""
    stages = sorted((c for c in reported if "stage" in c), key=lambda c: c["stage"])
    if not stages:
        return {}
    fields = {"compression_ratio": None,  # a pipeline sends activations, not gradients: no ratio to fp32 allreduce
              "p2p_bytes_per_step": max(c["p2p_bytes_per_step"] for c in stages),
              "stage_idle_fractions": json.dumps([round(c["idle_fraction"], 4) for c in stages]),
              "pipeline_bubble_predicted": stages[0]["bubble_predicted"]}
    if all("stage_layers" in c for c in stages):
        fields.update(stage_layers=json.dumps([c["stage_layers"] for c in stages]),
                      stage_flops_shares=json.dumps([round(c["flops_share"], 4) for c in stages]))
    if all("time_share" in c for c in stages):
        fields["stage_time_shares"] = json.dumps([round(c["time_share"], 4) for c in stages])
    return fields


def memory_fields(ranks: list[RankRecord]) -> dict[str, Any]:
    """Every rank's peak memory and the largest: resident memory of the worker's largest process (its
    supervisor's ``exit`` record; a worker's own ``end`` record where a supervisor did not say), and, on an
    accelerator, what its framework allocated and reserved (``memory`` records). Per rank as JSON lists
    (null for a rank that did not say: a parameter server holds no accelerator memory)."""
    fields: dict[str, Any] = {}
    rss = [(r.exit or {}).get("peak_rss_mb", (r.end or {}).get("peak_rss_mb")) for r in ranks]
    if rss and None not in rss:
        fields.update(peak_rss_mb=max(rss), rank_peak_rss_mb=json.dumps([round(p, 1) for p in rss]))
    for kind in ("allocated", "reserved"):
        peaks = [(r.memory or {}).get(f"gpu_{kind}_mb") for r in ranks]
        known = [p for p in peaks if p is not None]
        if known:
            fields[f"peak_gpu_{kind}_mb"] = max(known)
            fields[f"rank_peak_gpu_{kind}_mb"] = json.dumps([None if p is None else round(p, 1) for p in peaks])
    return fields


def accuracy_fields(ranks: list[RankRecord], target: float | None) -> dict[str, Any]:
    """Time-to-accuracy of a run whose workload evaluates: rank 0's held-out accuracy curve, the
    steps and training seconds (slowest rank per step, warm-up included) until ``target``."""
    first = ranks[0]
    if not first.evals:
        return {}
    curve = [(e["step"], e["accuracy"]) for e in first.evals]
    seconds = [max(t) for t in zip(*(r.warmup_steps for r in training(ranks)))] + \
        metrics.step_times([r.step_seconds for r in training(ranks)])
    steps, tta = metrics.time_to_target(curve, seconds, target) if target is not None else (None, None)
    return {
        "target_accuracy": target,
        "steps_to_target": steps,
        "time_to_target_s": tta,
        "final_accuracy": (first.end or {}).get("final_accuracy", curve[-1][1]),
        "accuracy_curve": json.dumps([[s, a, l] for s, a, l in
                                      ((e["step"], e["accuracy"], e["loss"]) for e in first.evals)]),
    }


def worker_facts(ranks: list[RankRecord], framework_module: str) -> dict[str, Any]:
    """Device, versions and GPU facts as rank 0 (or the first rank that said hello) reported them."""
    hello = next((r.hello for r in ranks if r.hello), None)
    end = next((r.end for r in ranks if r.end), None)
    facts: dict[str, Any] = {}
    if hello:
        versions = hello.get("versions", {})
        facts.update(device=hello.get("device"), versions=json.dumps(versions, sort_keys=True),
                     image=hello.get("image"),
                     framework_version=versions.get(framework_module), gpu_model=hello.get("gpu_model"),
                     gpu_count=hello.get("gpu_count"), strategy_note=hello.get("strategy_note"))
    if end:
        facts["parameters"] = end.get("parameters")
        facts["layout"] = end.get("layout")  # what ran, where memory_format is what was asked
    compile_times = [r.compile_s for r in ranks if r.compile_s is not None]
    if compile_times:
        facts["compile_s"] = max(compile_times)  # the ranks wait for the slowest
    hosts = sorted({r.hello["host"] for r in ranks if r.hello and r.hello.get("host")})
    if hosts:
        facts["hosts"] = json.dumps(hosts)
    checksums = {r.end["weights_checksum"] for r in ranks if r.end}
    if ranks and all(r.end for r in ranks):
        facts["weights_consistent"] = len(checksums) == 1
        facts["weights_checksum"] = ranks[0].end["weights_checksum"]
    return facts


def checkpoint_fields(ranks: list[RankRecord]) -> dict[str, Any]:
    """The checkpoint phase's columns (empty without one): each phase's slowest rank, GB (1e9) per second
    over all the bytes the ranks wrote or read, and how the page cache was kept out."""
    reported = [r.checkpoint for r in ranks if r.checkpoint]
    if not reported:
        return {}
    save_s, load_s = max(c["save_s"] for c in reported), max(c["load_s"] for c in reported)
    written, read = sum(c["bytes_written"] for c in reported), sum(c["bytes_read"] for c in reported)
    return {"checkpoint_mode": reported[0]["mode"], "checkpoint_bytes": written, "checkpoint_save_s": save_s,
            "checkpoint_save_gb_s": written / 1e9 / save_s if save_s > 0 else None,
            "checkpoint_load_s": load_s, "checkpoint_load_gb_s": read / 1e9 / load_s if load_s > 0 else None,
            "checkpoint_cache_defeat": reported[0]["cache_defeat"]}


def image_fields(run_dir: Path) -> dict[str, Any]:
    """The image the launcher ran the ranks in (its ``image.json``), or nothing where none did."""
    try:
        image = json.loads((run_dir / IMAGE_FILE).read_text())
    except FileNotFoundError:
        return {}
    return {"image": image["image"], "image_id": image.get("id") or None, "image_digest": image.get("digest") or None}
