"""MLPerf Storage v2.0's run rules as checks on a run's facts, and DLIO's ``potential_caching`` flag made finer
(pure functions: no I/O, no clock).

The rules: mlcommons/storage, ``Submission_guidelines.md`` on its v2.0-branch ("MLPerf Storage V2.0 Benchmark
Rules", commit 0bfbd3aa) and the validation rules, ``Rules.md`` (main, commit 0366ccfc); docs/storage.md maps
every rule to how Rosetta applies it and the column that says so. Each broken rule is one line,
``<rule>: <why>``, in the row's ``mlperf_violations``; the rule names are this module's ``RULE_*``.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.axes import CacheDrop

HOST_MEMORY_MULTIPLIER = 5  # the dataset is at least 5x the memory of the host nodes (6.6.2; 7)
MIN_STEPS = 500  # steps per epoch at least (7: num_steps_per_epoch is a minimum of 500)
RUNS = 6  # a warm-up run, then the 5 whose mean is the result (6.6.1; "benchmark result"; 2.1.17)
REPLICATION = 0.05  # "replicated results should be within 5% within 5 tries" (6.7)
CHECKPOINT_WRITES = 10  # checkpoints written and read per run (2.2.5, Table 3)

RULE_PAGE_CACHE = "page_cache"
RULE_EPOCH = "steps_per_epoch"
RULE_RUN_STEPS = "run_steps"
RULE_AU = "au"
RULE_RUNS = "runs"
RULE_REPLICATION = "replication"
RULE_SEED = "seed"
RULE_ACCELERATOR = "accelerator"
RULE_CHECKPOINT = "checkpoint"


def _gb(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 1e6:.1f} MB"


@dataclass(frozen=True)
class Reads:
    """What a run reads and what could have kept it in memory. Bytes; samples per rank from step 1."""

    dataset_bytes: int  # the objects the run's layout reads, the whole dataset (every rank's share)
    share_samples: int  # the smallest rank's share of the dataset (samples)
    run_samples: int  # samples one rank takes in the run, from step 1 (warm-up steps included)
    memory_bytes: int  # this machine's memory (the rules' memory_per_host)
    available_bytes: int  # what the page cache could grow to when the run started
    drop: CacheDrop = CacheDrop.NONE  # how the page cache was emptied before the run
    read_before: str = ""  # why the objects were read before this run's steps ("" if not): a warm fill, ...

    @property
    def rereads(self) -> bool:
        """Whether a rank takes some of its objects more than once in the run (more than one epoch)."""
        return self.run_samples > self.share_samples


def potential_caching(reads: Reads) -> tuple[bool, str]:
    """Whether the run's reads could have come from this machine's page cache, and why (DLIO's flag,
    ``potential_caching``, says the dataset is not larger than the host's memory; here a dataset larger
    than what is available cannot be held, and one emptied from the cache before the run and read once
    from step 1 on, nothing read before, cannot have been either)."""
    if reads.dataset_bytes > reads.available_bytes:
        return False, f"dataset {_gb(reads.dataset_bytes)} > {_gb(reads.available_bytes)} available memory"
    why = [f"dataset {_gb(reads.dataset_bytes)} fits in {_gb(reads.available_bytes)} available memory"]
    if reads.drop == CacheDrop.NONE:
        why.append("the page cache was not emptied before the run")
    if reads.rereads:
        why.append(f"a rank takes {reads.run_samples} samples of its {reads.share_samples}: objects read again")
    if reads.read_before:
        why.append(reads.read_before)
    if len(why) == 1:
        return False, f"{why[0]}, but emptied before the run ({reads.drop.value}) and each object read once"
    return True, "; ".join(why)


def page_cache_violation(reads: Reads) -> str | None:
    """MLPerf Storage's dataset-to-memory rule (at least 5x the host's memory), or its substitute where the
    machine cannot hold such a dataset: the page cache emptied before the run and every object read once
    from step 1 on (nothing in memory can serve a read). None when one holds."""
    if reads.dataset_bytes >= HOST_MEMORY_MULTIPLIER * reads.memory_bytes:
        return None
    caching, why = potential_caching(reads)
    if not caching:
        return None
    return (f"{RULE_PAGE_CACHE}: dataset {_gb(reads.dataset_bytes)} < {HOST_MEMORY_MULTIPLIER} x "
            f"{_gb(reads.memory_bytes)} memory, and {why.split('; ', 1)[-1]}")


@dataclass(frozen=True)
class RunFacts:
    """One run under the rules: its shape, its measures (the rules' definitions) and its dataset's reads."""

    reads: Reads | None  # None where the dataset could not be sized (its manifest unreadable)
    batch_per_worker: int
    world_size: int
    run_steps: int  # steps from step 1, warm-up included
    repeats: int  # runs of this configuration in the sweep
    au_rules: float | None  # the rules' AU (fraction), None where the run measured none
    au_threshold: float
    compute_source: str  # where the slept time came from (harness.machines.accelerators.resolve)
    seeds_distinct: bool = True  # every run of the configuration so far had its own seed
    checkpoint_mb: float = 0.0  # the checkpoint phase's size (0: none)


def run_violations(facts: RunFacts) -> list[str]:
    """The rules one run breaks, each ``<rule>: <why>`` (empty: the run complies on its own)."""
    out = []
    if facts.reads is None:
        out.append(f"{RULE_PAGE_CACHE}: the dataset's size is unknown (its manifest could not be read)")
    else:
        if (broken := page_cache_violation(facts.reads)) is not None:
            out.append(broken)
        per_epoch = facts.reads.share_samples // facts.batch_per_worker
        if per_epoch < MIN_STEPS:
            out.append(f"{RULE_EPOCH}: the dataset holds {per_epoch} steps per epoch at batch {facts.batch_per_worker} "
                       f"x {facts.world_size} accelerators; the rules need >= {MIN_STEPS}")
    if facts.run_steps < MIN_STEPS:
        out.append(f"{RULE_RUN_STEPS}: fewer than {MIN_STEPS} steps ({facts.run_steps}, from step 1)")
    if facts.au_rules is not None and facts.au_rules < facts.au_threshold:
        out.append(f"{RULE_AU}: AU {facts.au_rules:.1%} (the rules' count) < {facts.au_threshold:.0%}")
    if facts.repeats != RUNS:
        out.append(f"{RULE_RUNS}: {facts.repeats} runs of the configuration; the rules need {RUNS} "
                   f"(a warm-up run, then 5)")
    if not facts.seeds_distinct:
        out.append(f"{RULE_SEED}: a seed used by an earlier run of the configuration; each run needs its own")
    if facts.compute_source.startswith(("x", "given")):
        out.append(f"{RULE_ACCELERATOR}: the compute time is not a profile's measured one ({facts.compute_source})")
    if facts.checkpoint_mb:
        out.append(f"{RULE_CHECKPOINT}: 1 write and 1 read of {facts.checkpoint_mb:g} MB; the rules write and read "
                   f"{CHECKPOINT_WRITES} checkpoints of a llama3 model (8B: 105 GB, to 1T: 18 TB)")
    return out


def replication_spread(throughputs: list[float]) -> float:
    """How far apart the runs' throughputs are: (max - min) / min (0 for one run)."""
    low = min(throughputs)
    return (max(throughputs) - low) / low if low > 0 else float("inf")


def set_violations(own: list[str], earlier: list[list[str]], throughputs: list[float]) -> list[str]:
    """The last run of a configuration's set: its own violations, those of the runs before it (the
    warm-up run's included), and the replication check over the runs after the warm-up run
    (``throughputs``, the rules' samples/s, in order)."""
    out = list(own)
    broke = [str(i + 1) for i, v in enumerate(earlier) if v]
    if broke:
        out.append(f"set: run {', '.join(broke)} of {len(earlier) + 1} broke a rule (see its row)")
    if len(throughputs) >= 2 and (spread := replication_spread(throughputs)) > REPLICATION:
        out.append(f"{RULE_REPLICATION}: the {len(throughputs)} runs after the warm-up run spread "
                   f"{spread:.1%} in samples/s; the rules need within {REPLICATION:.0%}")
    return out
