"""Change points: Rosetta's detector (harness/gate/changepoints.py) against Apache Otava (E-divisive means,
the Hunter split/merge, its defaults: window 50, p 0.001) on the same synthetic histories, many seeds.

A third tool is our pipeline with Otava's E-divisive split and merge finding the steps in place of PELT
(everything else ours): how the step finder was chosen.

Histories are built from real rows: every launch's step times are a real launch's measured steps
(benchmarks/changepoints-template.json, taken from `rosetta run` rows; --template STORE to take them from
other rows), scaled to the history's level, times a lognormal launch-to-launch factor (3, 6 or 10%), with
occasional slow steps (each step with probability 3% takes 1.5 to 3 times as long). 40 sweeps of 3 launches.
Both tools see the same launches: Otava one figure per sweep (the median of its launches' throughput, as a
user would hand it the rows), ours every launch's figure. Deterministic by seed.

Cases: no change; a step down of 3, 5 and 10% at sweep 25; one sweep 15% slower (sweep 20, then back);
drift of -0.5% per sweep from sweep 10; two steps (-8% at 15, +8% at 28: a recovery); bimodal noise
(a third of launches 10% slower, no change).

Printed per case, noise and tool (and appended to benchmarks/RESULTS.md with the machine):
- flagged: share of histories with any change reported on the whole history (false alarms where nothing
  changed; ours counts steps, trends and a suspected newest sweep);
- detected: share with the planted change found (direction right, within 2 sweeps; both for two steps;
  for drift ours needs a trend, Otava's any step down; for the outlier, ours labelled it an outlier);
- steps: mean number of steps reported per history;
- delay: median sweeps from the first changed sweep until the tool first flags it (direction right, within
  2 sweeps) when the history is replayed sweep by sweep (0: on the changed sweep itself; ours counts a
  suspected newest sweep, as the gate does); a history never flagged counts as never, and the share flagged
  at all is beside it;
- gate alarms/sweep: replaying no-change histories sweep by sweep, the share of sweeps on which a CI gate
  would fail (ours: a suspected or newly confirmed step down; Otava: a new step down appears).
Also the time of `rosetta history` over 40 sweeps x 20 configurations, as a user runs it (a fresh process:
start-up, imports, table load, analysis, printing; with and without its chart), wall and CPU seconds.

Usage: python benchmarks/changepoints.py [--seeds 100] [--template STORE] [--no-write] [--quick]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import platform
import statistics
import sys
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.gate import changepoints as cp  # noqa: E402

TEMPLATE = REPO / "benchmarks" / "changepoints-template.json"
SWEEPS, REPEATS, BATCH = 40, 3, 8
NOISES = (0.03, 0.06, 0.10)
SLOW_STEP_P, SLOW_STEP = 0.03, (1.5, 3.0)


@dataclass(frozen=True)
class Case:
    name: str
    levels: tuple[float, ...]  # per sweep, throughput relative to the start
    changes: tuple[tuple[int, str], ...] = ()  # (first changed sweep, "down" | "up")
    bimodal: bool = False


def cases() -> list[Case]:
    flat = (1.0,) * SWEEPS
    step = lambda size: Case(f"step -{size:.0%}", (1.0,) * 25 + (1 - size,) * 15, ((25, "down"),))  # noqa: E731
    return [
        Case("no change", flat),
        step(0.03), step(0.05), step(0.10),
        Case("outlier -15%", flat[:20] + (0.85,) + flat[21:]),
        Case("drift -0.5%/sweep", (1.0,) * 10 + tuple(0.995 ** k for k in range(1, 31)), ((10, "down"),)),
        Case("two steps -8%/+8%", (1.0,) * 15 + (0.92,) * 13 + (1.0,) * 12, ((15, "down"), (28, "up"))),
        Case("bimodal noise", flat, bimodal=True),
    ]


# ---------------------------------------------------------------- histories


def load_template(source: str | None) -> tuple[list[np.ndarray], str]:
    """Real launches' step times, each divided by its mean (so the history's level sets the mean)."""
    if source:
        from harness.gate import compare

        rows = compare.load_source(source, "all")
        rows = rows[(rows["status"] == "ok") & rows["step_times_s"].notna()]
        launches = [json.loads(s) for s in rows["step_times_s"]]
        first = rows.iloc[0]
        where = (f"{len(launches)} real launches ({first['framework']} {first['workload']}/{first['size']}, "
                 f"{first['measured_steps']} measured steps, {first['cpu_model']}, sweep {first['sweep_id']})")
    else:
        data = json.loads(TEMPLATE.read_text())
        launches, where = data["launches"], data["source"]
    return [np.asarray(s, dtype=float) / np.mean(s) for s in launches if len(s) >= 2], where


def history(case: Case, noise: float, seed: int, template: list[np.ndarray]) -> list[list[np.ndarray]]:
    """Per sweep, per launch: step times (s) of a 0.1 s/step configuration at the case's levels."""
    rng = np.random.default_rng([seed, int(noise * 1000), zlib.crc32(case.name.encode())])
    sweeps = []
    for level in case.levels:
        launches = []
        for _ in range(REPEATS):
            factor = math.exp(rng.normal(0.0, noise))
            if case.bimodal and rng.random() < 1 / 3:
                factor *= 1.10
            steps = template[rng.integers(len(template))] * 0.1 * factor / level
            slow = rng.random(len(steps)) < SLOW_STEP_P
            steps = steps * np.where(slow, rng.uniform(*SLOW_STEP, len(steps)), 1.0)
            launches.append(steps)
        sweeps.append(launches)
    return sweeps


# ---------------------------------------------------------------- the two tools


def ours(sweeps: list[list[np.ndarray]]) -> cp.Analysis:
    return cp.analyse([[cp.launch_rate(s, BATCH) for s in launches] for launches in sweeps])


def ours_edivisive(sweeps: list[list[np.ndarray]]) -> cp.Analysis:
    """Our pipeline with Otava's E-divisive split and merge in place of PELT for the steps (same p and floor):
    which of the two step finders to use was chosen with this."""
    pelt = cp._segments
    cp._segments = _edivisive_segments
    try:
        return ours(sweeps)
    finally:
        cp._segments = pelt


def _edivisive_segments(core, y, sigma, settings):
    from otava.analysis import compute_change_points

    points, _ = compute_change_points([math.exp(y[i]) for i in core], max_pvalue=settings.confirm_alpha,
                                      min_magnitude=settings.floor)
    bounds = [p.index for p in points] + [len(core)]
    return [core[a:b] for a, b in zip([0] + bounds[:-1], bounds)]


def otava(sweeps: list[list[np.ndarray]]) -> list[tuple[int, str]]:
    """Otava's change points (index of the first sweep after, direction) on the per-sweep median throughput."""
    from otava.analysis import compute_change_points

    series = [float(np.median([BATCH * len(s) / s.sum() for s in launches])) for launches in sweeps]
    points, _ = compute_change_points(series)  # Otava's defaults: window 50, max p 0.001, min magnitude 0
    return [(p.index, "up" if p.stats.mean_2 > p.stats.mean_1 else "down") for p in points]


def ours_flags(a: cp.Analysis) -> list[tuple[int, str]]:
    found = [(c.index, c.direction) for c in a.changes]
    return found + ([(a.newest.index, a.newest.direction)] if a.newest else [])


def found(flags: list[tuple[int, str]], index: int, direction: str, slack: int = 2) -> bool:
    return any(abs(i - index) <= slack and d == direction for i, d in flags)


ANALYSES = {"ours": ours, "ours, E-divisive steps": ours_edivisive}
TOOLS = ("ours", "otava", "ours, E-divisive steps")


def ours_gate(sweeps, t: int, before: cp.Analysis | None, tool: str = "ours") -> tuple[bool, cp.Analysis]:
    """Would the gate fail on sweep t (a suspected or newly confirmed step down)?"""
    a = ANALYSES[tool](sweeps[:t + 1])
    old = {c.index for c in before.changes} if before else set()
    fails = bool(a.newest and a.newest.direction == "down") or any(
        c.direction == "down" and c.index not in old for c in a.changes)
    return fails, a


def replay_delay(sweeps, case: Case, tool: str) -> float:
    """Sweeps after the first change until the tool flags it, replaying; NaN if never."""
    index, direction = case.changes[0]
    for t in range(index, len(sweeps)):
        flags = ours_flags(ANALYSES[tool](sweeps[:t + 1])) if tool in ANALYSES else otava(sweeps[:t + 1])
        if found(flags, index, direction):
            return t - index
    return math.nan


def gate_alarms(sweeps, tool: str, start: int = 5) -> float:
    """No-change history replayed: the share of sweeps from ``start`` on where a CI gate would fail."""
    alarms, before, seen = 0, None, set()
    for t in range(start, len(sweeps)):
        if tool in ANALYSES:
            fails, before = ours_gate(sweeps, t, before, tool)
        else:
            now = {i for i, d in otava(sweeps[:t + 1]) if d == "down"}
            fails, seen = bool(now - seen), seen | now
        alarms += fails
    return alarms / (len(sweeps) - start)


# ---------------------------------------------------------------- the run


def judge(case: Case, tool: str, sweeps) -> dict:
    if tool in ANALYSES:
        a = ANALYSES[tool](sweeps)
        flags = ours_flags(a)
        steps = len(a.changes)
        flagged = bool(flags or a.trends)
    else:
        flags = otava(sweeps)
        steps, flagged = len(flags), bool(flags)
    if case.name.startswith("drift"):
        detected = any(t.slope < 0 for t in a.trends) if tool in ANALYSES else any(d == "down" for _, d in flags)
    elif case.name.startswith("outlier"):
        detected = 20 in a.outliers if tool in ANALYSES else False
    elif case.changes:
        detected = all(found(flags, i, d) for i, d in case.changes)
    else:
        detected = False
    return {"flagged": flagged, "detected": detected, "steps": steps}


def run(seeds: int, template: list[np.ndarray], delays: int, gate_seeds: int, only: str = "") -> list[dict]:
    out = []
    for case in [c for c in cases() if not only or any(w in c.name for w in only.split(","))]:
        for noise in NOISES:
            for tool in TOOLS:
                started = time.perf_counter()
                judged = [judge(case, tool, history(case, noise, s, template)) for s in range(seeds)]
                row = {"case": case.name, "noise": noise, "tool": tool, "histories": seeds,
                       "flagged": statistics.fmean(j["flagged"] for j in judged),
                       "detected": statistics.fmean(j["detected"] for j in judged) if case.changes
                       or case.name.startswith("outlier") else math.nan,
                       "steps": statistics.fmean(j["steps"] for j in judged)}
                if case.changes and not case.name.startswith("drift"):
                    ds = [replay_delay(history(case, noise, s, template), case, tool) for s in range(delays)]
                    hit = [d for d in ds if not math.isnan(d)]
                    # the median run length: a history never flagged counts as never (infinitely late)
                    row["delay"] = statistics.median([math.inf if math.isnan(d) else d for d in ds])
                    row["delay_n"] = f"{len(hit)}/{len(ds)}"
                if case.name == "no change":
                    row["gate"] = statistics.fmean(gate_alarms(history(case, noise, s, template), tool)
                                                   for s in range(gate_seeds))
                row["seconds"] = time.perf_counter() - started
                out.append(row)
                print(format_row(row), flush=True)
    return out


def pct(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.0%}"


def format_row(r: dict) -> str:
    d = r.get("delay", math.nan)
    delay = "-" if math.isnan(d) else f"{'never' if math.isinf(d) else f'{d:g}'} ({r['delay_n']})"
    return (f"| {r['case']} | {r['noise']:.0%} | {r['tool']} | {pct(r['flagged'])} | {pct(r['detected'])} | "
            f"{r['steps']:.2f} | {delay} | {pct(r.get('gate', math.nan)) if 'gate' in r else '-'} |")


HEADER = ("| case | noise | tool | flagged | detected | steps/history | delay, sweeps (found) | gate alarms/sweep |\n"
          "|---|---|---|---:|---:|---:|---:|---:|")


# ---------------------------------------------------------------- timing of rosetta history


def timing(template: list[np.ndarray], configs: int = 20, sweeps: int = SWEEPS) -> dict[str, float]:
    """Wall seconds of `rosetta history` as a user runs it (a fresh process: start-up and imports included)
    on a store of ``sweeps`` x ``configs`` x 3 launches, without and with its chart (best of 3 each); and
    of the analysis alone, in process."""
    import subprocess
    import tempfile

    from harness.gate import history
    from harness.results import table as results

    rng = np.random.default_rng(0)
    rows = [_row(c, s, r, template[rng.integers(len(template))] * 0.1 * math.exp(rng.normal(0, 0.03)))
            for c in range(configs) for s in range(sweeps) for r in range(REPEATS)]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        results.append(Path(tmp), rows)
        for name, extra in (("no chart", ["--no-chart"]), ("with chart", [])):
            runs, cpu = [], []
            for _ in range(3):
                started, used = time.perf_counter(), _children_cpu()
                done = subprocess.run([sys.executable, "-m", "harness.cli", "history", tmp, *extra], cwd=REPO,
                                      capture_output=True, text=True, check=False)
                runs.append(time.perf_counter() - started)
                cpu.append(_children_cpu() - used)
                if done.returncode not in (0, 1):
                    raise SystemExit(f"rosetta history exited {done.returncode}: {done.stderr[-500:]}")
            out[name], out[f"{name} cpu"] = min(runs), min(cpu)
        table = history.load([tmp])
        started = time.process_time()
        history.series(table)
        out["analysis"] = time.process_time() - started
    out["load"] = os.getloadavg()[0]
    return out


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far: less bent by a shared
    machine's load than wall time."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _row(config: int, sweep: int, repeat: int, steps: np.ndarray) -> dict:
    return {"schema_version": 2, "sweep_id": f"s{sweep:02d}", "run_id": f"s{sweep:02d}/{config}/{repeat}",
            "config_id": f"cfg{config:02d}", "framework": "torch_ddp", "workload": "resnet50", "size": "small",
            "nodes": 1, "procs_per_node": 1, "batch_per_worker": BATCH, "global_batch": BATCH,
            "strategy": "allreduce", "storage": "synthetic", "sample_unit": "images", "status": "ok",
            "repeat": repeat, "timestamp": f"2026-10-{1 + sweep // 24:02d}T{sweep % 24:02d}:00:{repeat:02d}+00:00",
            "step_times_s": json.dumps([float(x) for x in steps]),
            "throughput": BATCH * len(steps) / float(steps.sum()),
            "host": "bench", "cpu_model": "cpu", "cpu_cores": 2, "framework_version": "2.13.0",
            "versions": json.dumps({"torch": "2.13.0"}), "harness_commit": "abc"}


def machine() -> str:
    import psutil

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return f"{model} ({psutil.cpu_count()} cores, load {os.getloadavg()[0]:.1f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=100, help="histories per case and noise (default 100)")
    p.add_argument("--delay-seeds", type=int, default=30, help="histories replayed for the delay (default 30)")
    p.add_argument("--gate-seeds", type=int, default=20, help="no-change histories replayed for gate alarms")
    p.add_argument("--template", help="a results folder or .parquet whose ok rows' step times template launches")
    p.add_argument("--save-template", action="store_true",
                   help="with --template: write those launches to benchmarks/changepoints-template.json and stop")
    p.add_argument("--cases", default="", help="only the cases whose names contain one of these (comma-separated); "
                                                "prints, writes nothing")
    p.add_argument("--no-write", action="store_true", help="print only; do not append to benchmarks/RESULTS.md")
    args = p.parse_args()
    template, where = load_template(args.template)
    if args.save_template:
        launches = [[float(x) for x in t] for t in template]
        TEMPLATE.write_text(json.dumps({"source": where, "launches": launches}, indent=1) + "\n")
        print(f"template: {TEMPLATE} ({where})")
        return
    from importlib.metadata import version

    import otava  # noqa: F401  (fails here, before the work, when it is not installed)

    print(f"template: {where}; otava {version('apache-otava')}, ruptures {version('ruptures')}\n{HEADER}")
    rows = run(args.seeds, template, args.delay_seeds, args.gate_seeds, args.cases)
    if args.cases:
        return
    t = timing(template)
    line = (f"`rosetta history` over {SWEEPS} sweeps x 20 configurations x {REPEATS} launches, a fresh process each "
            f"(best of 3): {t['no chart']:.2f} s without the chart ({t['no chart cpu']:.2f} s of CPU), "
            f"{t['with chart']:.2f} s with it ({t['with chart cpu']:.2f} s of CPU); the series and their analysis "
            f"in process {t['analysis']:.2f} s of CPU (1-minute load average {t['load']:.1f})")
    print(line)
    if not args.no_write:
        write(rows, line, where, args)


def write(rows: list[dict], timing_line: str, where: str, args) -> None:
    buf = io.StringIO()
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    buf.write(f"\n\n# Change points: Rosetta vs Apache Otava (benchmarks/changepoints.py), {when}\n\n"
              f"{machine()}. {args.seeds} histories per case and noise ({SWEEPS} sweeps x {REPEATS} launches; "
              f"delay from {args.delay_seeds} replayed, gate alarms from {args.gate_seeds}); launches templated "
              f"on {where}. See the script's docstring for each column.\n\n{HEADER}\n")
    buf.write("\n".join(format_row(r) for r in rows) + f"\n\n{timing_line}.\n")
    with open(REPO / "benchmarks" / "RESULTS.md", "a") as fh:
        fh.write(buf.getvalue())


if __name__ == "__main__":
    main()
