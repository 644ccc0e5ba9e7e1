"""What a finished run left in its folder, read back as its ranks wrote it: their event records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping


def rank_events(row: Mapping[str, Any], rank: int, kind: str | None = None) -> list[dict[str, Any]]:
    """Rank ``rank``'s event records of the run a result row names (its ``run_dir``), in order; with ``kind``,
    only the records of that event ("hello", "data", "losses", "end", ...)."""
    path = Path(row["run_dir"]) / f"events-rank{rank}.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in events if kind is None or e["event"] == kind]


def every_rank_events(row: Mapping[str, Any], kind: str | None = None) -> list[list[dict[str, Any]]]:
    """Each rank's records (a list per rank, rank 0 first), as :func:`rank_events`."""
    return [rank_events(row, rank, kind) for rank in range(int(row["world_size"]))]


def assert_compute_attributed(row: Mapping[str, Any]) -> None:
    """A multi-rank run whose worker timed its own passes (``pass_timing``): every rank's measured steps timed,
    and the run's per-rank attribution (its folder's attribution.json) tells each rank's compute apart."""
    ranks = every_rank_events(row)
    timings = [next(e for e in events if e["event"] == "pass_timing") for events in ranks]
    for timing in timings:
        assert len(timing["steps"]) == row["measured_steps"]
        assert all(s["forward_compute_s"] >= 0 and s["backward_compute_s"] > 0 and s["backward_comm_s"] >= 0
                   for s in timing["steps"])
    kept = json.loads((Path(row["run_dir"]) / "attribution.json").read_text())["ranks"]
    assert len(kept) == len(ranks) and all(r["compute_s"] > 0 for r in kept)
    assert row["slowest_rank"] in range(len(ranks)) and row["straggler_score"] >= 1.0
