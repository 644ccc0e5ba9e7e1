"""``python -m harness.running.probe FRAMEWORK WORKLOAD:SIZE[:STEPS[:SEED]] ...``: a framework's equivalence probes.

Runs ``frameworks.<FRAMEWORK>.probe.probe`` in this process (which imports its framework) for each
case and prints one JSON object per case, in order: the probe's report (see
:mod:`harness.contract.equivalence`) with the probe format, framework, workload, size and forward FLOPs
per sample. One process serves all of a framework's cases: importing TensorFlow or PyTorch (and
transformers) is most of a probe's time. :func:`verify` runs them in their own process and checks them
against the reference (``rosetta equivalence``).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from typing import Any, Mapping

from harness.base import python_envs
from harness.contract.axes import Size, Workload
from harness.contract.equivalence import (
    PROBE_FORMAT,
    REFERENCE_FRAMEWORK,
    check,
    flops_per_sample,
    probe_recipe,
)
from harness.contract.workloads import DECLARATIONS

DEFAULT_STEPS = 4
DEFAULT_SEED = 0


def run_probe(framework: str, workload: Workload, size: Size, steps: int = DEFAULT_STEPS,
              seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The probe's report of ``framework`` for ``workload`` at ``size`` (imports that framework)."""
    from frameworks import FRAMEWORKS, REGISTRY

    module = importlib.import_module(f"{REGISTRY[FRAMEWORKS.check(framework)]}.probe")
    report = module.probe(workload, DECLARATIONS[workload].options(size), steps, seed)
    if len(report["losses"]) != steps:
        raise RuntimeError(f"{framework} probe returned {len(report['losses'])} losses for {steps} steps")
    return {"format": PROBE_FORMAT, "framework": framework, "workload": workload.value, "size": size.value,
            "flops_per_sample": flops_per_sample(report["layers"]), **report}


SIZE_ORDER = (Size.TINY, Size.SMALL, Size.FULL, Size.LARGE)


def probed_size(workload: Workload, size: Size) -> Size:
    """The size a probe of ``workload`` at ``size`` builds (``size``, or the workload's cap: asked for a larger
    one, the probe builds the cap and checks its parameters against the declaration's count from the options)."""
    cap = DECLARATIONS[workload].probe_size_cap  # a model too large to build here (Llama 3.1 8B: 32 GB of fp32)
    return cap if cap is not None and SIZE_ORDER.index(size) > SIZE_ORDER.index(cap) else size


def expected_parameters(workload: Workload, size: Size) -> int | None:
    """The parameter count a probe at ``size`` must read back: the published one at full size, the
    harness's count from the options where the probe builds a capped size; None otherwise."""
    info, built = DECLARATIONS[workload], probed_size(workload, size)
    if built != size:
        return info.counted_parameters(info.options(built))
    return info.published_parameters if size == Size.FULL else None


def published_workloads(workloads: list[Workload]) -> list[Workload]:
    """Those of ``workloads`` whose full-size model has a published parameter count."""
    return [w for w in workloads if DECLARATIONS[w].published_parameters is not None]


PROBE_TIMEOUT_S = 600


Case = tuple[Workload, Size, int]  # workload, size, training steps on the fixed batch


def probes_in_subprocess(framework: str, cases: list[Case],
                         env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The probe reports of ``cases``, in order, from one fresh Python process (frameworks never load
    into the harness). ``env``: the process's environment, for a caller in a thread beside one that
    changes ``os.environ`` (pytest does at every test): a child started with the live environment can
    find it reallocated under it and fail to start (EFAULT, seen)."""
    import frameworks

    argv = [f"{workload.value}:{size.value}:{steps}" for workload, size, steps in cases]
    environment = frameworks.get(framework).environment  # its family's interpreter, the harness on its path
    python = python_envs.worker_python(environment)
    env = dict(os.environ if env is None else env)
    if environment is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(python_envs.PINS_DIR.parents[1]), env.get("PYTHONPATH", "")])
    done = subprocess.run([python, "-m", "harness.running.probe", framework, *argv],
                          capture_output=True, text=True, timeout=PROBE_TIMEOUT_S * len(cases), env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{framework} probe of {' '.join(argv)} failed: {done.stderr.strip()[-2000:]}")
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-len(cases):]]


def verify(framework: str, workloads: list[Workload], size: Size, steps: int,
           references: dict[Workload, dict[str, Any]]) -> list[tuple[dict[str, Any], list[str]]]:
    """``framework``'s probe of each workload and its departures from the contract (empty when equivalent).

    The published parameter count is checked at the full size; a reference (the reference framework's
    probe of the same case) missing from ``references`` is run.
    """
    reports = probes_in_subprocess(framework, [(w, probed_size(w, size), steps) for w in workloads])
    missing = [w for w in workloads if w not in references and framework != REFERENCE_FRAMEWORK]
    if missing:
        references = {**references, **dict(zip(missing, probes_in_subprocess(
            REFERENCE_FRAMEWORK, [(w, probed_size(w, size), steps) for w in missing])))}
    return [(report, check(report, references.get(w, report), probe_recipe(w), expected_parameters(w, size)))
            for w, report in zip(workloads, reports)]


def parse_case(text: str) -> tuple[Workload, Size, int, int]:
    """``WORKLOAD:SIZE[:STEPS[:SEED]]`` as workload, size, steps and seed."""
    parts = text.split(":")
    if not 2 <= len(parts) <= 4:
        sys.exit(f"probe case {text!r}: expected WORKLOAD:SIZE[:STEPS[:SEED]]")
    steps = int(parts[2]) if len(parts) > 2 else DEFAULT_STEPS
    seed = int(parts[3]) if len(parts) > 3 else DEFAULT_SEED
    return Workload(parts[0]), Size(parts[1]), steps, seed


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        sys.exit(__doc__.splitlines()[0])
    for case in argv[1:]:
        report = run_probe(argv[0], *parse_case(case))
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
