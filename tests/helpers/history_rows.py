"""Result rows as `rosetta run` writes them, for the tests of history and the dashboard: one row per launch
with its raw step times (lognormal launch-to-launch noise, step-to-step noise, an occasional slow step)."""

import json
import math
import re


def _id_part(host: str) -> str:
    """A host name as a run id may hold it (ids become file names; the host column keeps it as it is)."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", host).strip("_.+-") or "host"


def sweep_rows(index: int, level_s: float, rng, *, config: str = "cfg", host: str = "m1", torch: str = "2.13.0",
               repeats: int = 3, spread: float = 0.02, **dims) -> list[dict]:
    """The rows of sweep `index` of one configuration whose steps take about `level_s` seconds.
    Sweeps are an hour apart (timestamps of sweep 0 to 719 stay within November)."""
    rows = []
    for r in range(repeats):
        launch = level_s * math.exp(rng.gauss(0, spread))
        steps = [launch * (1 + abs(rng.gauss(0, 0.02))) * (2.5 if rng.random() < 0.03 else 1) for _ in range(30)]
        rows.append({"schema_version": 2, "sweep_id": f"s{index:02d}",
                     "run_id": f"{_id_part(host)}/s{index:02d}/{config}/{r}",
                     "config_id": config, "framework": "torch_ddp", "workload": "resnet50", "size": "tiny",
                     "nodes": 1, "procs_per_node": 1, "batch_per_worker": 4, "global_batch": 4,
                     "strategy": "allreduce", "storage": "synthetic", "sample_unit": "images", "status": "ok",
                     "repeat": r, "timestamp": f"2026-11-{index // 24 + 1:02d}T{index % 24:02d}:00:{r:02d}+00:00",
                     "step_times_s": json.dumps(steps), "throughput": 4 * 30 / sum(steps),
                     "framework_version": torch, "versions": json.dumps({"torch": torch}), "host": host,
                     "cpu_model": "cpu", "cpu_cores": 2, "harness_commit": "abc", **dims})
    return rows
