"""``python -m harness.probe FRAMEWORK WORKLOAD SIZE [STEPS] [SEED]``: one framework's equivalence probe.

Runs ``frameworks.<FRAMEWORK>.probe.probe`` in this process (which imports its framework)
and prints one JSON object: the probe's report (see :mod:`harness.equivalence`) with the
probe format, framework, workload, size and forward FLOPs per sample.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from harness.axes import Size, Workload
from harness.equivalence import PROBE_FORMAT, flops_per_sample
from harness.workloads import WORKLOADS

DEFAULT_STEPS = 4
DEFAULT_SEED = 0


def run_probe(framework: str, workload: Workload, size: Size, steps: int = DEFAULT_STEPS,
              seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The probe's report of ``framework`` for ``workload`` at ``size`` (imports that framework)."""
    from frameworks import REGISTRY

    module = importlib.import_module(f"{REGISTRY[framework]}.probe")
    report = module.probe(workload, WORKLOADS[workload].options(size), steps, seed)
    if len(report["losses"]) != steps:
        raise RuntimeError(f"{framework} probe returned {len(report['losses'])} losses for {steps} steps")
    return {"format": PROBE_FORMAT, "framework": framework, "workload": workload.value, "size": size.value,
            "flops_per_sample": flops_per_sample(report["layers"]), **report}


def main(argv: list[str]) -> None:
    if len(argv) not in (3, 4, 5):
        sys.exit(__doc__.splitlines()[0])
    steps = int(argv[3]) if len(argv) > 3 else DEFAULT_STEPS
    seed = int(argv[4]) if len(argv) > 4 else DEFAULT_SEED
    report = run_probe(argv[0], Workload(argv[1]), Size(argv[2]), steps, seed)
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
