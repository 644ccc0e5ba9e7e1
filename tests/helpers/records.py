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
