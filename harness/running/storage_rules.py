"""A real-data run's page-cache facts and, under MLPerf Storage's rules, its verdict.

Before a run reads a dataset (:func:`before_launch`): the dataset's footprint from its manifest, this
machine's memory, and under ``rules = "mlperf_storage"`` the page cache emptied (harness.storage.page_cache).
After it (:func:`row_fields`): DLIO's ``potential_caching`` flag on every storage row, the rules' AU,
samples/s and checkpoint GB/s beside ours on every emulated row, and under the rules the row's verdict
(harness.results.mlperf), the last run of a configuration's set carrying the set's (replication
included). A :class:`Ledger` follows a sweep: which datasets its runs read since the cache was last
emptied, and each configuration's runs so far.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from harness.contract.axes import CacheDrop, Rules, Status, Storage
from harness.contract.events import RankRecord
from harness.contract.spec import RunSpec
from harness.results import mlperf
from harness.storage import backends, page_cache


@dataclass
class Ledger:
    """What a sweep's earlier runs did that a later run's verdict depends on."""

    repeats: int = 1  # runs per configuration in the scenario
    read_since_drop: set[str] = field(default_factory=set)  # datasets read since the page cache was emptied
    # configuration -> its runs so far, in order: (seed, own violations, the rules' samples/s)
    runs: dict[str, list[tuple[int, list[str], float | None]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Before:
    """What was known and done before the run started."""

    footprint: page_cache.Footprint | None
    memory_bytes: int
    available_bytes: int
    drop: CacheDrop
    read_earlier: bool  # an earlier run of the sweep read this dataset and the cache was not emptied since
    error: str = ""  # why the footprint is unknown


def _dataset_store(spec: RunSpec) -> backends.Store:
    """The dataset's own store: for a cache in front of a remote, the remote (the cache's folder is the run's)."""
    options = dict(spec.storage_options)
    backend = spec.storage.value
    if backends.get(backend).fronts:
        backend = str(options["remote"])
    return backends.Store(backend, options)


def before_launch(spec: RunSpec, ledger: Ledger) -> Before | None:
    """The dataset's footprint and this machine's memory; under the rules, the page cache emptied first.
    None for synthetic data (nothing read)."""
    if spec.storage == Storage.SYNTHETIC or not spec.storage_options:
        return None
    footprint, error = None, ""
    try:
        store = _dataset_store(spec)
        footprint = page_cache.read_footprint(store, str(spec.storage_options.get("layout") or "files"))
    except Exception as exc:  # a server down, a missing manifest: the run itself will say so; the flag stays unknown
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    drop = CacheDrop.NONE
    if spec.rules == Rules.MLPERF_STORAGE:
        drop = page_cache.drop(footprint.local_files if footprint else ())
        if drop == CacheDrop.DROP_CACHES:
            ledger.read_since_drop.clear()
    key = f"{spec.storage_options.get('endpoint_url', '')} {spec.storage_options.get('url')}"  # the same objects
    if drop == CacheDrop.FADVISE:
        ledger.read_since_drop.discard(key)
    read_earlier = key in ledger.read_since_drop
    ledger.read_since_drop.add(key)
    total, available = page_cache.memory()
    return Before(footprint, total, available, drop, read_earlier, error)


def reads(spec: RunSpec, before: Before) -> mlperf.Reads | None:
    """The run's reads, as the rules' checks take them (None where the footprint is unknown)."""
    if before.footprint is None:
        return None
    why = []
    if before.read_earlier:
        why.append("an earlier run of this sweep read the dataset (the cache not emptied since)")
    if spec.storage.fills_cache:
        why.append("each rank read its share once before the window (warm)")
    return mlperf.Reads(dataset_bytes=before.footprint.bytes, share_samples=before.footprint.samples // spec.world_size,
                        run_samples=(spec.warmup_steps + spec.measured_steps) * spec.batch_per_worker,
                        memory_bytes=before.memory_bytes, available_bytes=before.available_bytes, drop=before.drop,
                        read_before="; ".join(why))


def rules_measures(ranks: list[RankRecord], batch: int) -> dict[str, Any]:
    """MLPerf Storage's AU and samples/s (DLIO's count: every step from step 1; AU leaves the first step's
    time and compute out, each rank's averaged; samples/s summed over ranks) and its checkpoint GB/s (the
    slowest rank's own bytes over its own seconds); empty where no rank reported an emulated window."""
    emulated = [r.emulation for r in ranks if r.emulation and "run_s" in r.emulation]
    if not emulated:
        return {}
    out: dict[str, Any] = {
        "au_rules": statistics.fmean(e["compute_s"] * (e["run_steps"] - 1) / (e["run_s"] - e["first_step_s"])
                                     for e in emulated),
        "throughput_rules": sum(e["run_steps"] * batch / e["run_s"] for e in emulated)}
    checkpoints = [r.checkpoint for r in ranks if r.checkpoint]
    for phase, moved in (("save", "bytes_written"), ("load", "bytes_read")):
        rates = [c[moved] / 1e9 / c[f"{phase}_s"] for c in checkpoints if c[moved] > 0 and c[f"{phase}_s"] > 0]
        if rates:
            out[f"checkpoint_{phase}_gb_s_rules"] = min(rates)
    return out


def row_fields(spec: RunSpec, status: Status, ranks: list[RankRecord], before: Before | None,
               ledger: Ledger) -> dict[str, Any]:
    """The row's page-cache columns and, under the rules, its measures and verdict."""
    if before is None:
        return {}
    fields: dict[str, Any] = {"client_memory_gb": before.memory_bytes / 2**30,
                              "memory_available_gb": before.available_bytes / 2**30,
                              "page_cache_drop": before.drop.value}
    run_reads = reads(spec, before)
    if run_reads is None:
        fields["potential_caching_why"] = f"unknown: the dataset's manifest could not be read ({before.error})"
    else:
        fields["dataset_bytes"] = run_reads.dataset_bytes
        fields["potential_caching"], fields["potential_caching_why"] = mlperf.potential_caching(run_reads)
    measures = rules_measures(ranks, spec.batch_per_worker) if status == Status.OK else {}
    fields.update(measures)
    if spec.rules == Rules.MLPERF_STORAGE:
        fields.update(verdict(spec, status, run_reads, measures, ledger))
    return fields


def verdict(spec: RunSpec, status: Status, run_reads: mlperf.Reads | None, measures: dict[str, Any],
            ledger: Ledger) -> dict[str, Any]:
    """The rules' verdict on this run; the last run of its configuration's set also judges the set."""
    config = spec.config_id()
    earlier = ledger.runs.setdefault(config, [])
    facts = mlperf.RunFacts(reads=run_reads, batch_per_worker=spec.batch_per_worker, world_size=spec.world_size,
                            run_steps=spec.warmup_steps + spec.measured_steps, repeats=ledger.repeats,
                            au_rules=measures.get("au_rules"),
                            au_threshold=float(spec.emulation.get("au_threshold", 0.9)),
                            compute_source=str(spec.emulation.get("source", "")),
                            seeds_distinct=spec.seed not in {seed for seed, _, _ in earlier},
                            checkpoint_mb=float(spec.storage_options.get("checkpoint_mb", 0.0))
                            if spec.storage_options.get("checkpoint", "off") != "off" else 0.0)
    own = mlperf.run_violations(facts)
    if status != Status.OK:
        own.insert(0, f"status: the run ended {status.value}")
    earlier.append((spec.seed, own, measures.get("throughput_rules")))
    fields: dict[str, Any] = {}
    violations = own
    if spec.repeat == ledger.repeats - 1 and len(earlier) > 1:  # the set's last run: judge the set
        after_warmup = [t for _, _, t in earlier[1:]]
        if len(after_warmup) >= 2 and all(t is not None for t in after_warmup):
            fields["mlperf_replication_spread"] = mlperf.replication_spread(after_warmup)
        violations = mlperf.set_violations(own, [v for _, v, _ in earlier[:-1]],
                                           [t for t in after_warmup if t is not None])
    fields.update(mlperf_compliant=not violations, mlperf_violations=json.dumps(violations))
    return fields
