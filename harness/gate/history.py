"""Each configuration's throughput over time on each machine, its levels and changes, and the gate's verdict.

The store is the results table itself (``results.parquet``): every run of every sweep is appended to it
and none is ever dropped; several stores (e.g. one per CI machine) can be read together.

A **series** is one configuration (``config_id``) on one machine (``MACHINE_FIELDS``: the host and what the
provenance says makes machines differ), so stores from two machines never mix. Each sweep of a series is
one point; :mod:`harness.gate.changepoints` finds its levels, steps, outliers and trends from every
launch's figure. A change of provenance (versions, driver, commit) between consecutive sweeps is shown
beside the step it may explain.

The **gate** is :mod:`harness.gate.sequential`'s pass: each sweep judged once, in time order, against the
level before it, so that this run's verdict on the newest sweep is what the run after that sweep said, and
a step confirmed once stays in every later report. A run fails (exit 1) when its newest sweep **confirms**
a step down (or starts a drift down): once per change; a **suspected** change (the newest sweeps depart)
is reported without failing; later sweeps pass and name the step. A store's marks
(:mod:`harness.gate.marks`) accept a sweep as the new normal. Launches measured on a busy machine
(``machine_busy``) are left out at the source; a sweep with no other launch is not judged, and says so.
Each series states its minimum detectable effect, and with ``canary`` its canary's finding
(:mod:`harness.gate.canary`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pandas as pd

from harness.base.errors import UserError
from harness.contract.axes import Status
from harness.gate import canary as canaries, changepoints as cp, compare, marks as store_marks, where
from harness.gate import sources as sources_of
from harness.results import table as results

MACHINE_FIELDS = ("host", "cpu_model", "cpu_cores", "gpu_model", "gpu_count")  # series never mix across these
BUSY_COLUMNS = ("machine_busy", "busy_note", "other_cpu_share")  # a busy launch is left out (table.is_busy)
REGRESSION, IMPROVEMENT, SAME, NOT_JUDGED = "regression", "improvement", "no change", "not judged"
DRIFT = "drift"  # a verdict's status: a step that continues a drift already confirmed (not failing)


@dataclass(frozen=True)
class Point:
    """One sweep of one series."""

    sweep_id: str
    timestamp: str  # UTC ISO 8601 of the sweep's last run
    runs: int  # rows of this series in the sweep
    repeats: int  # launches measured (ok) and judged
    launch_rates: tuple[float, ...]  # samples/s of each such launch (changepoints.launch_rate)
    rate: float  # samples/s, the sweep's figure (median of its launches); NaN: not judged
    throughput_median: float  # samples/s, median of the rows' own throughput column
    fitted: float  # samples/s, the level (or trend) at this sweep; NaN: not judged
    label: str = ""  # "outlier", "suspected", "accepted: why", or why not judged ("busy: ...", "nothing measured")
    provenance: tuple[str, ...] = ()  # what differs from the previous sweep
    slowed: float = 0.0  # the expected number of its launches in the slow mode (a neighbour's), modelled


@dataclass(frozen=True)
class Step:
    """A change between two levels of a series, at the sweep it starts on."""

    sweep_id: str
    timestamp: str
    direction: str  # "down" (slower) or "up" (faster)
    change: float  # fraction of throughput, after / before - 1
    before: float  # samples/s
    after: float  # samples/s
    p_value: float
    verdict: str  # "confirmed", "accepted" (a team's mark) or "suspected" (the newest sweeps, open)
    provenance: tuple[str, ...] = ()  # what changed at that sweep: the likely cause
    decided: str = ""  # the sweep whose run confirmed or accepted it (failed CI, for a step down)
    drift: str = ""  # the first sweep of the drift this step continues ("": a change of its own)
    note: str = ""  # an acceptance's reason
    where: str = ""  # the straggler and the phase that moved from the sweep before (harness.gate.where)

    @property
    def causes(self) -> tuple[str, ...]:
        """What changed at the step (provenance), then where it moved (per-rank data): what the sinks show."""
        return self.provenance + ((f"where: {self.where}",) if self.where else ())


@dataclass(frozen=True)
class Span:
    """A level (slope 0) or a trend: sweeps ``first`` to ``last`` of the series."""

    first: str  # sweep ids
    last: str
    rate: float  # samples/s at its first sweep
    end_rate: float  # samples/s at its last sweep
    slope: float = 0.0  # fraction of throughput per sweep (a trend; negative: getting slower)
    p_value: float = math.nan


@dataclass(frozen=True)
class Verdict:
    """The gate's reading of a series' newest sweep: its change, its p, and the step it belongs to."""

    sweep_id: str
    verdict: str  # REGRESSION, IMPROVEMENT, SAME or NOT_JUDGED
    status: str = ""  # "confirmed" (by this sweep), "suspected" or DRIFT, for a regression or an improvement
    change: float = math.nan  # the newest sweep against the level it is judged by, a fraction of throughput
    p_value: float = math.nan  # of that change
    note: str = ""
    step: str = ""  # the first sweep of the step or suspicion the newest sweep belongs to
    step_change: float = math.nan  # that step's change (new level / old - 1)
    step_p: float = math.nan

    @property
    def fails(self) -> bool:
        """CI fails: the newest sweep confirmed a step down (once per change)."""
        return self.verdict == REGRESSION and self.status == cp.CONFIRMED


@dataclass(frozen=True)
class Series:
    """One configuration on one machine over time: what a report or a dashboard draws."""

    config_id: str
    machine: str  # "host (cpu model, cores, gpu)"
    label: str
    unit: str  # samples are images or sequences
    points: tuple[Point, ...]
    levels: tuple[Span, ...]
    steps: tuple[Step, ...]  # confirmed steps, then the newest sweep's suspected one if any
    outliers: tuple[str, ...]  # sweep ids
    verdict: Verdict
    noise: float  # one sweep's figure's standard deviation, a fraction
    notes: tuple[str, ...] = field(default_factory=tuple)
    mde: float = math.nan  # the smallest step down its gate confirms with 80% power from 3 sweeps, a fraction
    canary: canaries.Canary | None = None  # the planted step's finding (with canary=True)
    withdrawn: tuple[str, ...] = ()  # suspicions withdrawn, each "sweep: why"
    slowed_share: float = 0.0  # the share of its launches modelled as slowed (a neighbour's), 0: none

    @property
    def trends(self) -> tuple[Span, ...]:
        return tuple(s for s in self.levels if s.slope)


def load(sources: Sequence[str | Path], last: int | None = None) -> pd.DataFrame:
    """Every row of the sources (a run in two of them once), in the columns a series is made of (COLUMNS):
    a store's specs, telemetry and per-step JSON beyond them are never read. ``last``: only the rows of the
    sweeps among some series' ``last`` newest (chosen from the id, time and machine columns, then read; what
    :func:`series` with ``last`` analyses is all there)."""
    sweeps = None
    if last:
        # the key columns alone (a run id only where two sources may hold one run): 10^6 rows of them
        columns = KEY_COLUMNS if len(sources) > 1 else KEY_COLUMNS[1:]
        keys = pd.concat([sources_of.key_columns(s, columns) for s in sources], ignore_index=True)
        keys = keys.drop_duplicates("run_id") if "run_id" in keys else keys
        kept = _last_sweeps(keys.assign(_machine=_machines(keys)), last)
        sweeps = sorted(set(kept["sweep_id"].astype(str)))
    frames = [compare.load_source(s, "all", COLUMNS, sweeps) for s in sources]
    return pd.concat(frames, ignore_index=True).drop_duplicates("run_id")


def _present(value) -> bool:
    return value is not None and not pd.isna(value) and str(value) != ""


def machine_of(row) -> str:
    """The machine a row was measured on, in words: "host (cpu model, N cores, gpu model x count)"."""
    value = {f: row[f] if f in row and _present(row[f]) else None for f in MACHINE_FIELDS}
    facts = [str(value["cpu_model"]) if value["cpu_model"] else "",
             f"{value['cpu_cores']} cores" if value["cpu_cores"] else "",
             f"{value['gpu_model']} x{value['gpu_count'] or 1}" if value["gpu_model"] else ""]
    host = str(value["host"]) if value["host"] else "unknown host"
    facts = [f for f in facts if f]
    return f"{host} ({', '.join(facts)})" if facts else host


def select(table: pd.DataFrame, config_id: str | None = None, host: str | None = None) -> pd.DataFrame:
    """The rows of the configurations starting with ``config_id`` on hosts named ``host``."""
    if config_id is not None:
        known = sorted(table["config_id"].dropna().unique())
        matches = [c for c in known if str(c).startswith(config_id)]
        if not matches:
            raise UserError(f"--config: no configuration {config_id!r}; known: {', '.join(known)}")
        table = table[table["config_id"].isin(matches)]
    if host is not None:
        hosts = sorted({str(h) for h in table["host"].dropna()})
        if host not in hosts:
            raise UserError(f"--host: no host {host!r}; known: {', '.join(hosts) or '(none recorded)'}")
        table = table[table["host"] == host]
    return table


def series(table: pd.DataFrame, *, config_id: str | None = None, host: str | None = None,
           last: int | None = None, settings: cp.Settings = cp.Settings(),
           marks: Sequence[store_marks.Mark] = (), canary: bool = False) -> list[Series]:
    """Every series in the table (configuration x machine), its last ``last`` sweeps analysed; ``marks``:
    the stores' marks (accepted sweeps); ``canary``: also plant the canary in each."""
    table = select(table, config_id, host)
    wanted = [c for c in table.columns if c in COLUMNS and c != "run_id"]
    table = table[wanted].assign(_machine=_machines(table))
    if last:  # the rows of each series' last sweeps alone become records (10^6 rows of dicts: gigabytes)
        table = _last_sweeps(table, last)
    groups: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for row in table.to_dict("records"):  # plain records: pandas per sweep costs 20x the analysis
        key = (str(row["config_id"]), row.pop("_machine"))
        groups.setdefault(key, {}).setdefault(str(row["sweep_id"]), []).append(row)
    return [one_series(sweeps, settings, last, marks, canary) for sweeps in groups.values()]


def _machines(table: pd.DataFrame) -> pd.Series:
    """machine_of each row, made once per distinct machine (a store has a few, over 10^6 rows)."""
    fields = [f for f in MACHINE_FIELDS if f in table.columns]
    if not fields or table.empty:
        return pd.Series(machine_of({}), index=table.index, dtype=object)
    grouped = table.groupby(fields, dropna=False, sort=False)  # groups numbered in order of first appearance
    firsts = table.loc[grouped.head(1).index, fields].to_dict("records")
    names = [machine_of(row) for row in firsts]
    return pd.Series(names, dtype=object).iloc[grouped.ngroup().to_numpy()].set_axis(table.index)


def _last_sweeps(table: pd.DataFrame, last: int) -> pd.DataFrame:
    """The rows of the ``last`` newest sweeps of each series (config_id x machine), sweeps ordered by their
    newest row's timestamp as :func:`one_series` orders them (ties: the sweep seen first first)."""
    sweeps = table.groupby([table["config_id"].astype(str), table["_machine"], table["sweep_id"].astype(str)],
                           sort=False)
    sweep = sweeps.ngroup()  # a number per (series, sweep), in order of first appearance
    # a timestamp's rank in sorted order, whose maximum is the newest text's (a string maximum per group falls
    # back to Python, one call a sweep: minutes at 10^6 rows)
    rank = pd.Series(pd.factorize(table["timestamp"].astype(str), sort=True)[0], index=table.index)
    firsts = table.loc[sweeps.head(1).index]
    of_series = firsts.groupby([firsts["config_id"].astype(str), firsts["_machine"]], sort=False).ngroup()
    newest = pd.DataFrame({"series": of_series.to_numpy(), "newest": rank.groupby(sweep).max().to_numpy()})
    kept = newest.sort_values("newest", kind="stable").groupby("series", sort=False).tail(last).index
    return table[sweep.isin(kept).to_numpy()]

NEEDED = ("config_id", "sweep_id", "timestamp", "status", "reason", "step_times_s", "throughput", "global_batch",
          "sample_unit", "framework", "workload", "size", "nodes", "procs_per_node", "batch_per_worker", "strategy",
          "storage", "launcher", *BUSY_COLUMNS)
# what history and the dashboard read of a store (harness.gate.dashboard's DIMENSIONS are among NEEDED)
COLUMNS = tuple(dict.fromkeys(("run_id", *NEEDED, *MACHINE_FIELDS, *compare.PROVENANCE_FIELDS, *where.COLUMNS)))
KEY_COLUMNS = ("run_id", "config_id", "sweep_id", "timestamp", *MACHINE_FIELDS)  # what a series' sweeps are known by


def one_series(by_sweep: dict[str, list[dict]], settings: cp.Settings, last: int | None = None,
               marks: Sequence[store_marks.Mark] = (), canary: bool = False) -> Series:
    """One configuration on one machine: its sweeps (rows per sweep id) in time order, analysed."""
    stamps = {sid: max(str(r["timestamp"]) for r in rows) for sid, rows in by_sweep.items()}
    ids = sorted(by_sweep, key=lambda sid: stamps[sid])[-last if last else 0:]
    first = by_sweep[ids[0]][0]
    batch = float(first["global_batch"])
    launches, why = zip(*(_launch_rates(by_sweep[sid], batch) for sid in ids))
    launches = [list(x) for x in launches]
    judged = [bool(x) for x in launches]
    host = str(first["host"]) if "host" in first and _present(first["host"]) else ""
    accepted = {ids.index(sid): reason for sid, reason in store_marks.accepted(marks, first["config_id"], host).items()
                if sid in ids}
    analysis = cp.analyse(launches, settings, judged, accepted, ids)
    facts = [compare.provenance_facts(by_sweep[sid]) for sid in ids]
    provenance = [()] + [compare.facts_changes(a, b) for a, b in zip(facts, facts[1:])]
    suspected = set(range(analysis.newest.index, len(ids))) if analysis.newest else set()
    labels = ["outlier" if i in analysis.outliers else f"accepted: {accepted[i]}" if i in accepted
              else "suspected" if i in suspected and judged[i] else why[i] for i in range(len(ids))]
    points = tuple(Point(
        sweep_id=sid, timestamp=stamps[sid], runs=len(by_sweep[sid]), repeats=len(launches[i]),
        launch_rates=tuple(launches[i]), rate=analysis.rates[i], fitted=analysis.fitted[i],
        throughput_median=_median([r["throughput"] for r in by_sweep[sid] if r["status"] == Status.OK.value]),
        label=labels[i], provenance=provenance[i], slowed=analysis.slowed[i] if analysis.slowed else 0.0,
    ) for i, sid in enumerate(ids))
    steps = [_step(c, ids, stamps, provenance, by_sweep) for c in analysis.changes]
    if analysis.newest:
        steps.append(_step(analysis.newest, ids, stamps, provenance, by_sweep))
    found = canaries.run(launches, judged, accepted, settings.alpha, settings.floor, analysis.mde) if canary else None
    return Series(
        config_id=str(first["config_id"]), machine=machine_of(first), label=compare.label_of(first),
        unit=str(first["sample_unit"]), points=points,
        levels=tuple(Span(first=ids[lv.start], last=ids[lv.stop - 1], rate=lv.rate, end_rate=lv.end_rate,
                          slope=lv.slope, p_value=lv.p_value) for lv in analysis.levels),
        steps=tuple(steps), outliers=tuple(ids[i] for i in analysis.outliers),
        verdict=_verdict(analysis, ids, list(why)), noise=analysis.noise, notes=analysis.notes, mde=analysis.mde,
        canary=found, withdrawn=tuple(f"{ids[w.index]}: {w.reason}" for w in analysis.withdrawn),
        slowed_share=analysis.slowed_share)


def _median(values) -> float:
    values = sorted(float(v) for v in values if _present(v))
    return float(pd.Series(values).median()) if values else math.nan


def _launch_rates(rows: list[dict], batch: float) -> tuple[list[float], str]:
    """samples/s of each measured launch that did not run on a busy machine; else why none."""
    ok = [r for r in rows if r["status"] == Status.OK.value and _present(r["step_times_s"])]
    if not ok:
        return [], "nothing measured: " + ", ".join(sorted({str(r["status"]) for r in rows}))
    quiet = [r for r in ok if not results.is_busy(r)]
    if not quiet:
        return [], f"not judged: the machine was busy in all {len(ok)} launches ({results.busy_figure(ok[0])})"
    rates = [r for r in (cp.launch_rate(json.loads(r["step_times_s"]), batch) for r in quiet) if math.isfinite(r)]
    return rates, "" if rates else "not judged: no finite, positive step time in its launches"


def _step(change: cp.Change, ids: list[str], stamps: dict[str, str], provenance, by_sweep) -> Step:
    sid = ids[change.index]
    # no frames made for a step without per-rank rows
    per_rank = change.index > 0 and any(isinstance(r.get("slowest_host"), str) for r in by_sweep[sid])
    # the phase against the sweep before; the straggler's score against every earlier sweep (its own history)
    earlier = pd.DataFrame([r for before in ids[:change.index] for r in by_sweep[before]]) if per_rank else None
    moved = where.where_moved(pd.DataFrame(by_sweep[ids[change.index - 1]]), pd.DataFrame(by_sweep[sid]),
                              history=earlier) if per_rank else None
    return Step(sweep_id=sid, timestamp=stamps[sid], direction=change.direction, change=change.change,
                where=moved.text() if moved else "",
                before=change.before, after=change.after, p_value=change.p_value, verdict=change.verdict,
                provenance=provenance[change.index], decided=ids[change.decided] if change.decided >= 0 else "",
                drift=ids[change.drift] if change.drift is not None else "", note=change.note)


def _verdict(now: cp.Analysis, ids: list[str], why: list[str]) -> Verdict:
    """The newest sweep as the gate's pass read it: confirmed, suspected, no change, or why not judged."""
    newest, r = ids[-1], now.reading
    if why[-1]:
        return Verdict(newest, NOT_JUDGED, note=why[-1])
    if r is None or not r.decision:
        return Verdict(newest, NOT_JUDGED, note=(r.note if r and r.note else "too few sweeps to judge"))
    common = {"change": r.change, "p_value": r.p_value, "note": r.note,
              "step": ids[r.step] if r.step is not None else "", "step_change": r.step_change, "step_p": r.step_p}
    direction = REGRESSION if r.direction == cp.DOWN else IMPROVEMENT
    if r.decision == cp.CONFIRMED:
        return Verdict(newest, direction, DRIFT if r.drift is not None else cp.CONFIRMED, **common)
    if r.decision == cp.SUSPECTED:
        return Verdict(newest, direction, cp.SUSPECTED, **common)
    if now.trends and now.levels[-1].slope and not r.note.startswith("on the drift"):
        common["note"] = (r.note + "; " if r.note else "") + f"on a trend of {now.levels[-1].slope:+.2%} per sweep"
    return Verdict(newest, SAME, **common)


def gate_failed(all_series: Sequence[Series]) -> bool:
    """True when a CI gate should fail: some series' newest sweep confirmed a step down (once per change)."""
    return any(s.verdict.fails for s in all_series)
