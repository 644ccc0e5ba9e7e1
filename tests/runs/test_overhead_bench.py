"""benchmarks/overhead.py end to end, one framework at a time: a harness run and the framework's bare loop
(benchmarks/bare_loops/<framework>.py), each launched by the framework's launcher, one round at tiny size
(1 warm-up and 2 measured steps); the table goes to a file of the test's own. Frameworks that cannot run
here are skipped, saying why."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import frameworks
from harness.contract.axes import Size, Workload
from harness.results import provenance

sys.path.insert(0, str(provenance.REPO_ROOT / "benchmarks"))
import overhead  # noqa: E402


@pytest.mark.parametrize("framework", frameworks.names())
def test_one_round_against_the_bare_loop(framework, tmp_path):
    reason = overhead.bare_loop_reason(framework) or overhead.skip_reason(
        overhead.make_spec(framework, Workload.RESNET50, Size.TINY, 1, overhead.BATCH, 1, 2))
    if reason:
        pytest.skip(reason)
    results = tmp_path / "RESULTS.md"
    # JAX's compiled programs (the worker's step and the bare loop's) kept between test runs, outside the clone: the
    # cold compilation of each takes a minute or more on 2 busy cores, outside both measured windows
    env = {**os.environ, "ROSETTA_JAX_COMPILE_CACHE": str(Path.home() / ".cache" / "rosetta" / "jax-compile")}
    out = subprocess.run([sys.executable, "benchmarks/overhead.py", "--frameworks", framework, "--rounds", "1",
                          "--size", "tiny", "--warmup", "1", "--steps", "2", "--results", str(results)],
                         cwd=provenance.REPO_ROOT, capture_output=True, text=True, env=env,
                         timeout=2 * 900 + 60)  # each launch stops itself at 900 s, naming what hung
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{framework} ({frameworks.get(framework).launcher}): median harness" in out.stdout
    rows = [line for line in results.read_text().splitlines() if line.startswith(f"| {framework} |")]
    assert len(rows) == 1, results.read_text()
    numbers = [float(cell) for cell in rows[0].strip("|").split("|")[2:]]
    assert len(numbers) == 7 and numbers[0] > 0 and numbers[1] > 0  # harness and bare images/s, ratio, times
