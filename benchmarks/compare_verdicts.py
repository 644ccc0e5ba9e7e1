"""rosetta compare's verdicts over many seeds: the whole-window rule (typical step, then throughput) beside
the median-only rule it replaced, on the same synthetic sides.

Each side is ``repeats`` launches of ``steps`` measured steps: a launch level drawn lognormal around
80 ms (``--noise``: launch-to-launch spread), 2% step-to-step noise, and 5% of steps slowed by
+60% (a shared machine only ever adds time). Cases: the same code (every verdict but "no change" and
"inconclusive" is a false alarm), a planted 10% slowdown of every step, a stall: every third step 3x
slower (throughput -40%, the median step unchanged), and the issue's stall: every third step 5x slower
(2 of 6 steps: throughput -57%). Rules: the median alone (the rule before the window), the whole window
judged by Welch's t of the pooled steps (the rule before the two levels), and the whole window judged with
launches and steps as two levels (the rule now). Prints the verdict counts per case and rule and
appends the table to benchmarks/RESULTS.md.

    python benchmarks/compare_verdicts.py [--seeds 200]
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import math
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness.gate import compare  # noqa: E402
from harness.results import provenance  # noqa: E402

SHAPES = ((2, 6), (2, 20), (3, 30), (5, 30))  # (repeats, measured steps): the quickstart's is 2 x 6


def side(rng: random.Random, repeats: int, steps: int, noise: float, case: str, level: float = 0.080):
    out = []
    for _ in range(repeats):
        launch = level * math.exp(abs(rng.gauss(0, noise)))
        times = [launch * (1 + abs(rng.gauss(0, 0.02))) * (1.6 if rng.random() < 0.05 else 1.0) for _ in range(steps)]
        if case == "slower 10%":
            times = [t * 1.1 for t in times]
        elif case.startswith("stall"):
            factor = 5 if case == "stall 5x" else 3
            times = [t * factor if i % 3 == 2 else t for i, t in enumerate(times)]
        out.append(tuple(times))
    return compare.Side(tuple(out), ())


def median_only(base: compare.Side, cur: compare.Side) -> str:
    """The rule before: the fastest launch's median step time alone."""
    change = base.location() / cur.location() - 1
    threshold = compare.noise_threshold(base.steps)
    p = compare.mann_whitney_p(base.steps, cur.steps)
    low, high = compare.bootstrap_ci(base.steps, cur.steps)
    return compare._judge(change, threshold, p, low, high, compare.ALPHA)  # noqa: SLF001


def whole_window(base: compare.Side, cur: compare.Side, nested: bool = True) -> str:
    verdict = compare.compare_sides(base, cur, nested=nested)["verdict"]
    if verdict in (compare.REGRESSION, compare.IMPROVEMENT) and min(base.repeats, cur.repeats) < compare.MIN_LAUNCHES:
        return compare.INCONCLUSIVE
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.03, 0.06])
    args = parser.parse_args()
    order = [compare.REGRESSION, compare.IMPROVEMENT, compare.INCONCLUSIVE, compare.SAME]
    lines = ["| launches x steps | launch noise | case | rule | " + " | ".join(order) + " |",
             "|---|---|---|---|" + "---:|" * len(order)]
    for repeats, steps in SHAPES:
        for noise in args.noise:
            for case in ("same code", "slower 10%", "stall", "stall 5x"):
                counts = {rule: collections.Counter() for rule in ("median only", "window, Welch", "window, two levels")}
                for seed in range(args.seeds):
                    rng = random.Random(seed)
                    base = side(rng, repeats, steps, noise, "same code")
                    cur = side(rng, repeats, steps, noise, case)
                    counts["median only"][median_only(base, cur)] += 1
                    counts["window, Welch"][whole_window(base, cur, nested=False)] += 1
                    counts["window, two levels"][whole_window(base, cur)] += 1
                for rule, found in counts.items():
                    cells = [f"{found[v] / args.seeds:.1%}" for v in order]
                    lines.append(f"| {repeats} x {steps} | {noise:.0%} | {case} | {rule} | " + " | ".join(cells) + " |")
                    print(lines[-1], flush=True)
    machine = provenance.machine()
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    text = (f"\n## rosetta compare's verdicts over {args.seeds} seeds (benchmarks/compare_verdicts.py), {stamp}\n\n"
            f"{machine['cpu_model']} ({machine['cpu_cores']} cores, load {os.getloadavg()[0]:.1f}; the figures do "
            "not depend on the machine). Share of comparisons per verdict; \"median only\" is the rule before "
            "(the fastest launch's median step); \"window, Welch\" then throughput by Welch's t of the pooled "
            "steps (the rule before); \"window, two levels\" throughput with launches and steps as two levels "
            f"(the rule now; both with {compare.MIN_LAUNCHES} launches a side for a verdict). Same code: regression "
            "and improvement are false alarms; slower 10%: regression is detection; stall: every third step 3x "
            "slower (throughput -40%, the median step unchanged); stall 5x: every third step 5x slower (2 of 6 "
            "steps: -57%).\n\n" + "\n".join(lines) + "\n")
    with open(HERE / "RESULTS.md", "a") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
