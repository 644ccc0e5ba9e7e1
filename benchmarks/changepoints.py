"""The regression gate replayed as CI sees it: Rosetta's `rosetta history` gate beside Apache Otava on the
same synthetic histories, every prefix of every history judged as a CI run would judge the store after it.

Histories are built from real rows: every launch's step times are a real launch's measured steps
(benchmarks/changepoints-template.json, taken from `rosetta run` rows; --template STORE to take them from
other rows), scaled to the history's level, times a lognormal launch-to-launch factor (3, 6 or 10%), with
occasional slow steps (each step with probability 3% takes 1.5 to 3 times as long). 40 sweeps of 3 launches;
deterministic by seed. "Bimodal": one launch in five slowed by 25% as a whole (a neighbour on a shared
runner), no change.

Replay: for each sweep n from FIRST_RUN on, a CI run on the store holding sweeps 0..n. Ours: the gate of
harness/gate/changepoints.py on that prefix alone, a fresh analysis (the run fails when it confirms a step
down or a drift down). Otava 0.8.0 with its defaults (E-divisive means with Hunter's split and merge, window
50, max p 0.001, min magnitude 0) on the prefix's per-sweep medians of the launches' throughput, as a user
would hand it the rows; its run fails when it lists a step down not within SLACK sweeps of one an earlier
run listed (so a step Otava moves by a sweep or two is not a new failure).

Per case, noise and tool:
- false/run: failing runs not attributed to a planted change, per run (a failing run is attributed when the
  step it names, ours, or one of its new steps, Otava's, lies within SLACK sweeps of a planted change down;
  for drift, anywhere from its start on);
- detected: share of histories where some run failed for the planted change down (CI saw it);
- delay: median sweeps from the change to the first such run (never: inf), and how many saw it;
- fails/step: mean failing runs per planted change down; flapping: histories where the runs failing for
  one planted change are not consecutive (fail, pass, fail);
- vanished: histories where a step a run reported (ours: confirmed; Otava: any change point) is missing
  from a later run's report (Otava: none within SLACK sweeps);
- final: the last run's verdict on the case's point: for the newest-sweep drop, the change our verdict gives
  the newest sweep (median) and the share of histories where it is suspected from that sweep itself (no run
  fails on one sweep: it may be an outlier); for two steps, the share whose last report holds both.
Also the time of `rosetta history` over 40 sweeps x 20 configurations (a fresh process, best of 3).

Usage: python benchmarks/changepoints.py [--seeds 30] [--cases NAME,...] [--no-write]
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
SLOWED_SHARE, SLOWED_BY = 0.2, 1.25  # bimodal: one launch in five, 25% slower
FIRST_RUN = 5  # the first sweep a CI run judges (both tools)
SLACK = 2  # sweeps a reported change may sit from the planted one


@dataclass(frozen=True)
class Case:
    name: str
    levels: tuple[float, ...]  # per sweep, throughput relative to the start
    changes: tuple[tuple[int, str], ...] = ()  # (first changed sweep, "down" | "up")
    bimodal: bool = False
    no_change: bool = False  # false alarms are all it can show (40 seeds: the seeds option x 4 / 3)


def cases() -> list[Case]:
    flat = (1.0,) * SWEEPS
    step = lambda size: Case(f"step -{size:.0%}", (1.0,) * 25 + (1 - size,) * 15, ((25, "down"),))  # noqa: E731
    return [
        Case("no change", flat, no_change=True),
        Case("bimodal, no change", flat, bimodal=True, no_change=True),
        step(0.03), step(0.05), step(0.10),
        Case("outlier -15%", flat[:20] + (0.85,) + flat[21:]),
        Case("drift -0.5%/sweep", (1.0,) * 10 + tuple(0.995 ** k for k in range(1, 31)), ((10, "down"),)),
        Case("two steps -8%/+8%", (1.0,) * 15 + (0.92,) * 13 + (1.0,) * 12, ((15, "down"), (28, "up"))),
        Case("newest sweep -10%", flat[:-1] + (0.90,), ((SWEEPS - 1, "down"),)),
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
            if case.bimodal and rng.random() < SLOWED_SHARE:
                factor *= SLOWED_BY
            steps = template[rng.integers(len(template))] * 0.1 * factor / level
            slow = rng.random(len(steps)) < SLOW_STEP_P
            launches.append(steps * np.where(slow, rng.uniform(*SLOW_STEP, len(steps)), 1.0))
        sweeps.append(launches)
    return sweeps


# ---------------------------------------------------------------- the runs of each tool


@dataclass(frozen=True)
class Run:
    """One CI run: whether it failed, the change indexes its failure is about, what its report holds."""

    fails: bool
    about: tuple[int, ...]  # ours: the step it confirmed; Otava: its new steps down
    reported: tuple[int, ...]  # ours: confirmed steps; Otava: every change point
    change: float = math.nan  # ours: the newest sweep's change in the verdict
    names: int = -1  # ours: the sweep the verdict's step starts at


def ours(sweeps: list[list[np.ndarray]]) -> list[Run]:
    """Every prefix judged afresh, as CI holds the store after each sweep."""
    rates = [[cp.launch_rate(s, BATCH) for s in launches] for launches in sweeps]
    runs = []
    for n in range(FIRST_RUN, len(sweeps)):
        a = cp.analyse(rates[:n + 1])
        r = a.reading
        runs.append(Run(fails=bool(r and r.fails), about=(r.step,) if r and r.fails else (),
                        reported=tuple(c.index for c in a.changes if c.verdict == cp.CONFIRMED),
                        change=r.change if r else math.nan, names=r.step if r and r.step is not None else -1))
    return runs


def otava(sweeps: list[list[np.ndarray]]) -> list[Run]:
    from otava.analysis import compute_change_points

    series = [float(np.median([BATCH * len(s) / s.sum() for s in launches])) for launches in sweeps]
    runs, seen = [], []
    for n in range(FIRST_RUN, len(sweeps)):
        points, _ = compute_change_points(series[:n + 1])  # Otava's defaults
        found = [(p.index, "up" if p.stats.mean_2 > p.stats.mean_1 else "down") for p in points]
        down = [i for i, d in found if d == "down"]
        new = tuple(i for i in down if not any(abs(i - j) <= SLACK for j in seen))
        seen += down
        runs.append(Run(fails=bool(new), about=new, reported=tuple(i for i, _ in found)))
    return runs


TOOLS = {"ours": ours, "otava": otava}


# ---------------------------------------------------------------- scoring


def attributed(case: Case, index: int) -> int | None:
    """The planted change down a reported change index belongs to, or None."""
    for i, d in case.changes:
        if d != "down":
            continue
        if case.name.startswith("drift") and index >= i - SLACK:
            return i
        if abs(index - i) <= SLACK:
            return i
    return None


def score(case: Case, runs: list[Run]) -> dict:
    """One history's replay: false failures, the first planted change's detection and delay, flapping,
    vanished steps, and the final run's verdict."""
    downs = [i for i, d in case.changes if d == "down"]
    false = 0
    failing: dict[int, list[int]] = {i: [] for i in downs}
    for k, run in enumerate(runs):
        if not run.fails:
            continue
        owners = {attributed(case, i) for i in run.about} - {None}
        if not owners:
            false += 1
        for owner in owners:
            failing[owner].append(k)
    flapping = any(b - a > 1 for ks in failing.values() for a, b in zip(ks, ks[1:]))
    vanished = False
    for k, run in enumerate(runs):
        for i in run.reported:
            if any(not any(abs(i - j) <= SLACK for j in later.reported) for later in runs[k + 1:]):
                vanished = True
    first = failing[downs[0]] if downs else []
    delay = (FIRST_RUN + first[0] - downs[0]) if first else math.inf
    last = runs[-1]
    return {"false": false, "runs": len(runs), "detected": bool(first), "delay": delay,
            "fails": sum(len(ks) for ks in failing.values()), "flapping": flapping, "vanished": vanished,
            "final_change": last.change, "names_newest": last.names == SWEEPS - 1,
            "both": all(any(abs(i - c) <= SLACK for i in last.reported) for c, _ in case.changes)}


def run(seeds: int, template: list[np.ndarray], only: str = "") -> list[dict]:
    out = []
    for case in [c for c in cases() if not only or any(w in c.name for w in only.split(","))]:
        n = seeds * 4 // 3 if case.no_change else seeds
        for noise in NOISES:
            histories = [history(case, noise, s, template) for s in range(n)]
            for tool, replay in TOOLS.items():
                started = time.perf_counter()
                scored = [score(case, replay(h)) for h in histories]
                out.append(summarise(case, noise, tool, scored, time.perf_counter() - started))
                print(format_row(out[-1]), flush=True)
    return out


def summarise(case: Case, noise: float, tool: str, scored: list[dict], seconds: float) -> dict:
    delays = [s["delay"] for s in scored]
    row = {"case": case.name, "noise": noise, "tool": tool, "histories": len(scored),
           "false": sum(s["false"] for s in scored) / sum(s["runs"] for s in scored),
           "flapping": sum(s["flapping"] for s in scored), "vanished": sum(s["vanished"] for s in scored),
           "seconds": seconds}
    if any(d == "down" for _, d in case.changes):
        row |= {"detected": statistics.fmean(s["detected"] for s in scored), "delay": statistics.median(delays),
                "found": sum(math.isfinite(d) for d in delays), "fails": statistics.fmean(s["fails"] for s in scored)}
    if case.name.startswith("newest") and tool == "ours":
        row["final"] = (f"the newest sweep's change {statistics.median(s['final_change'] for s in scored):+.1%} "
                        f"(median); suspected from that sweep itself in "
                        f"{statistics.fmean(s['names_newest'] for s in scored):.0%}")
    if case.name.startswith("two steps"):
        row["final"] = f"both steps in the last report: {statistics.fmean(s['both'] for s in scored):.0%}"
    return row


def pct(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.0%}"


def format_row(r: dict) -> str:
    cells = [r["case"], f"{r['noise']:.0%}", r["tool"], str(r["histories"]), f"{r['false']:.2%}"]
    if "delay" in r:
        delay = "never" if math.isinf(r["delay"]) else f"{r['delay']:g}"
        cells += [pct(r["detected"]), f"{delay} ({r['found']}/{r['histories']})", f"{r['fails']:.1f}"]
    else:
        cells += ["-", "-", "-"]
    cells += [str(r["flapping"]), str(r["vanished"]), r.get("final", "")]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| case | noise | tool | histories | false failures/run | detected by CI | delay, sweeps (found) | "
          "fails/step | flapping | vanished | final run |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")


# ---------------------------------------------------------------- timing of rosetta history


def timing(template: list[np.ndarray], configs: int = 20, sweeps: int = SWEEPS) -> dict[str, float]:
    """Wall and CPU seconds of `rosetta history` as a user runs it (a fresh process: start-up and imports
    included) on a store of ``sweeps`` x ``configs`` x 3 launches, without and with its chart (best of 3
    each); and of the analysis alone, in process."""
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
    p.add_argument("--seeds", type=int, default=30, help="histories per case and noise (no-change cases: 4/3 as "
                                                         "many; default 30, so 40)")
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

    print(f"template: {where}; otava {version('apache-otava')}\n{HEADER}")
    started = time.perf_counter()
    rows = run(args.seeds, template, args.cases)
    if args.cases:
        return
    t = timing(template)
    line = (f"`rosetta history` over {SWEEPS} sweeps x 20 configurations x {REPEATS} launches, a fresh process each "
            f"(best of 3): {t['no chart']:.2f} s without the chart ({t['no chart cpu']:.2f} s of CPU), "
            f"{t['with chart']:.2f} s with it ({t['with chart cpu']:.2f} s of CPU); the series and their analysis "
            f"in process {t['analysis']:.2f} s of CPU (1-minute load average {t['load']:.1f}). The replay took "
            f"{time.perf_counter() - started:.0f} s")
    print(line)
    if not args.no_write:
        write(rows, line, where, args)


SETUP = ("Ours: `rosetta history`'s gate (harness/gate/changepoints.py, its defaults: alpha 0.01, floor 3%) on "
         "every launch's figure, each prefix analysed afresh; a run fails when its newest sweep confirms a step "
         "down or a drift down. Otava 0.8.0 (`otava.analysis.compute_change_points` with its defaults: window 50, "
         "max p 0.001, min magnitude 0) on each prefix's per-sweep median of the launches' throughput; a run fails "
         "when a step down appears that no earlier run listed within {slack} sweeps. Both judge runs from sweep "
         "{first} on.")


def write(rows: list[dict], timing_line: str, where: str, args) -> None:
    buf = io.StringIO()
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    buf.write(f"\n\n# The gate replayed as CI: Rosetta vs Apache Otava (benchmarks/changepoints.py), {when}\n\n"
              f"{machine()}. {args.seeds} histories per case and noise, {args.seeds * 4 // 3} for the no-change "
              f"cases ({SWEEPS} sweeps x {REPEATS} launches); launches templated on {where}. "
              f"{SETUP.format(slack=SLACK, first=FIRST_RUN)} See the script's docstring for each column.\n\n"
              f"{HEADER}\n")
    buf.write("\n".join(format_row(r) for r in rows) + f"\n\n{timing_line}.\n")
    with open(REPO / "benchmarks" / "RESULTS.md", "a") as fh:
        fh.write(buf.getvalue())


if __name__ == "__main__":
    main()
