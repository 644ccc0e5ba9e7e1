"""The dashboard's HTML pages (:mod:`harness.gate.dashboard` writes them). Every string from the data
(configuration labels, machines, sweep ids, provenance, notes) goes through ``harness.base.escaping.html``: a results
table is input, and none of it may become markup or script in the pages."""

from __future__ import annotations

import math
from harness.base.escaping import html as escape
from typing import Callable, Sequence

from harness.gate.ci_reports import describe_series
from harness.gate.dashboard_svg import chart

FILTERS = ("framework", "workload", "storage", "strategy", "machine", "verdict", "canary", "freshness")


def _page(title: str, heading: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{escape(heading)} - {escape(title)}</title><link rel="stylesheet" href="dashboard.css"></head>\n'
            f'<body><nav><a href="index.html">all series</a><a href="regressions.html">regressions</a></nav>'
            f'<h1>{escape(heading)}</h1><p class="muted">{escape(title)}</p>\n{body}\n'
            f'<script src="dashboard.js"></script></body></html>\n')


def _verdict(s) -> str:
    v = s.verdict
    text = v.verdict + (f" ({v.status})" if v.status else "")
    change = f" {v.change:+.1%}" if not math.isnan(v.change) else ""
    css = v.verdict if v.verdict in ("regression", "improvement") else "muted"
    return f'<span class="{escape(css)}">{escape(text + change)}</span>'


def _values(entry) -> dict:
    """What the filters read of a series: its dimensions, machine, verdict, canary and freshness."""
    canary = entry.series.canary.state if entry.series.canary else "not run"
    return {**entry.dimensions, "machine": entry.series.machine, "verdict": entry.series.verdict.verdict,
            "canary": canary, "freshness": "stale" if entry.stale else "fresh"}


def _attributes(entry) -> str:
    values = _values(entry)
    return f' data-config="{escape(entry.series.config_id)}"' + "".join(
        f' data-{key}="{escape(str(values.get(key, "")))}"' for key in FILTERS)


def _filters(listed: Sequence) -> str:
    """A select box per filter, its options the values the series have."""
    boxes = []
    for key in FILTERS:
        values = sorted({_values(e).get(key, "") for e in listed})
        options = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
        boxes.append(f'<label>{key}<select data-filter="{key}"><option value="">all</option>{options}</select></label>')
    return (f'<p class="filters">{"".join(boxes)}</p><p id="shown" class="muted">{len(listed)} series</p>')


def _mde(s) -> str:
    return f"{-s.mde:+.1%}" if math.isfinite(s.mde) else "-"


def _canary(s) -> str:
    """The canary's state, its finding on hover."""
    if s.canary is None:
        return '<span class="muted">not run</span>'
    css = {"seen": "improvement", "blind": "regression"}.get(s.canary.state, "muted")
    return f'<span class="canary {css}" title="{escape(s.canary.note)}">{escape(s.canary.state)}</span>'


def _link(entry) -> str:
    return f'<a href="{escape(entry.page)}">{escape(entry.series.label)}</a>'


def index(listed: Sequence, title: str) -> str:
    """Every series: its dimensions, newest figure and verdict, and a sparkline."""
    rows = []
    for e in listed:
        s, latest = e.series, e.latest
        figure = f"{latest.rate:.4g} {escape(s.unit)}/s" if latest else "-"
        if latest and latest is not s.points[-1]:
            figure += f' <span class="muted">(at {escape(latest.sweep_id)})</span>'  # the newest was not judged
        dims = "".join(f"<td>{escape(e.dimensions.get(d, ''))}</td>" for d in FILTERS[:4])
        stale = f' <span class="stale">stale: {e.age_days:.0f} days</span>' if e.stale else ""
        rows.append(f'<tr data-series{_attributes(e)}><td>{_link(e)}</td><td>{escape(s.machine)}</td>{dims}'
                    f'<td>{escape(s.points[-1].sweep_id)}{stale}</td><td class="num">{figure}</td><td>{_verdict(s)}</td>'
                    f'<td class="num">{_mde(s)}</td><td>{_canary(s)}</td><td>{chart(s, 220, 48, small=True)}</td></tr>')
    failing = sum(e.series.verdict.fails for e in listed)
    head = "".join(f"<th>{escape(h)}</th>" for h in ("configuration", "machine", *FILTERS[:4], "newest sweep", "newest figure",
                                             "verdict", "min. detectable", "canary", "sweeps"))
    summary = (f'<p>{len(listed)} series; <a href="regressions.html">{failing} regressed</a> on their newest sweep.'
               f' Filter, or link a filtered view as <code>index.html#framework=...&amp;verdict=regression</code>.</p>')
    body = f'{summary}{_filters(listed)}<table id="series"><tr>{head}</tr>{"".join(rows)}</table>'
    return _page(title, "Throughput history", body)


def _provenance(items: Sequence[str]) -> str:
    if not items:
        return '<span class="muted">no change recorded</span>'
    return '<ul class="provenance">' + "".join(f"<li>{escape(p)}</li>" for p in items) + "</ul>"


def _steps_table(s) -> str:
    if not s.steps:
        return '<p class="muted">no steps</p>'
    rows = "".join(
        f'<tr class="step"><td>{escape(st.sweep_id)}</td><td>{escape(st.timestamp)}</td>'
        f'<td class="{"regression" if st.direction == "down" else "improvement"}">{escape(st.direction)}</td>'
        f'<td class="num">{st.change:+.1%}</td><td class="num">{st.before:.4g} &rarr; {st.after:.4g}</td>'
        f'<td class="num">{st.p_value:.2g}</td><td>{escape(st.verdict)}</td><td>{_provenance(st.causes)}</td></tr>'
        for st in s.steps)
    head = "".join(f"<th>{escape(h)}</th>" for h in ("first sweep", "time", "direction", "change", f"{s.unit}/s",
                                             "p", "verdict", "what changed (provenance)"))
    return f'<table id="steps"><tr>{head}</tr>{rows}</table>'


def _levels_table(s) -> str:
    rows = "".join(
        f'<tr><td>{escape(lv.first)}</td><td>{escape(lv.last)}</td><td class="num">{lv.rate:.4g}</td>'
        f'<td class="num">{lv.end_rate:.4g}</td><td>{"trend" if lv.slope else "level"}</td>'
        f'<td class="num">{f"{lv.slope:+.2%}/sweep (p {lv.p_value:.2g})" if lv.slope else "-"}</td></tr>'
        for lv in s.levels)
    head = "".join(f"<th>{escape(h)}</th>" for h in ("from", "to", f"{s.unit}/s at start", "at end", "kind", "slope"))
    return f'<table id="levels"><tr>{head}</tr>{rows}</table>' if rows else '<p class="muted">no levels</p>'


def _points_table(s) -> str:
    def num(v: float) -> str:
        return f"{v:.4g}" if math.isfinite(v) else "-"

    rows = "".join(
        f'<tr><td>{escape(p.sweep_id)}</td><td>{escape(p.timestamp)}</td><td class="num">{p.runs}</td>'
        f'<td class="num">{p.repeats}</td><td class="num">{num(p.rate)}</td><td class="num">{num(p.fitted)}</td>'
        f'<td>{escape(p.label)}</td><td>{_provenance(p.provenance) if p.provenance else ""}</td></tr>'
        for p in reversed(s.points))
    head = "".join(f"<th>{escape(h)}</th>" for h in ("sweep", "time", "runs", "launches judged", f"{s.unit}/s", "level",
                                             "label", "what changed"))
    return f'<table id="points"><tr>{head}</tr>{rows}</table>'


def series_page(entry, title: str) -> str:
    """One series: its verdict, its chart, its steps with their provenance, levels, trends, outliers, sweeps."""
    s = entry.series
    dims = ", ".join(f"{k} {v}" for k, v in entry.dimensions.items() if v)
    outliers = ", ".join(s.outliers) or "none"
    notes = "".join(f'<p class="note-text">{escape(n)}</p>' for n in s.notes if n != s.verdict.note)
    css = s.verdict.verdict if s.verdict.verdict in ("regression", "improvement") else "muted"
    noise = f"&plusmn;{s.noise:.1%} per sweep" if math.isfinite(s.noise) else "not known (too few sweeps)"
    gauge = (f'<p id="power">minimum detectable effect: {_mde(s)} (a step down its gate confirms with 80% power '
             f'from 3 sweeps); canary: {_canary(s)} {escape(s.canary.note if s.canary else "")}</p>')
    stale = (f'<p class="stale" id="stale">stale: no new sweep for {entry.age_days:.0f} days</p>'
             if entry.stale else "")
    withdrawn = "".join(f"<li>{escape(w)}</li>" for w in s.withdrawn)
    body = (f'<p>{escape(s.machine)}; {escape(dims)}; configuration <code>{escape(s.config_id)}</code></p>'
            f'<p>newest sweep: <span class="{escape(css)}">{escape(describe_series(s))}</span></p>{notes}'
            f'{stale}{gauge}'
            f'{chart(s)}<p class="muted">grey: launches; blue: sweeps (median of launches); orange: levels and '
            f'trends; red/green lines: steps down/up (dashed confirmed, dotted suspected); red circles: outliers; '
            f'grey crosses at the bottom: sweeps not judged (see their label below).</p>'
            f'<h2>Steps</h2>{_steps_table(s)}<h2>Levels and trends</h2>{_levels_table(s)}'
            f'<h2>Outliers</h2><p id="outliers">{escape(outliers)}</p>'
            f'<p class="muted">noise: {noise}</p>'
            + (f'<h2>Suspicions withdrawn</h2><ul id="withdrawn">{withdrawn}</ul>' if withdrawn else "")
            + f'<h2>Sweeps</h2>{_points_table(s)}')
    return _page(title, f"{s.label} on {s.machine}", body)


def regressions(listed: Sequence, title: str, current: Callable, past: Callable, suspected: Callable) -> str:
    """The series whose newest sweep failed the history gate, those with a suspected step down, then past
    confirmed steps down."""
    now = [e for e in listed if e.series.verdict.fails]
    head = "".join(f"<th>{escape(h)}</th>" for h in ("configuration", "machine", "newest sweep", "verdict", "p", "why",
                                             "what changed at the step"))
    older = [(e, st) for e in listed for st in past(e.series)]
    past_rows = "".join(
        f'<tr data-series{_attributes(e)} class="past"><td>{_link(e)}</td><td>{escape(e.series.machine)}</td>'
        f'<td>{escape(st.sweep_id)}</td><td class="num">{st.change:+.1%}</td><td>{_provenance(st.causes)}</td></tr>'
        for e, st in older)
    past_head = "".join(f"<th>{escape(h)}</th>" for h in ("configuration", "machine", "step at sweep", "change",
                                                  "what changed"))
    watched = [e for e in listed if suspected(e.series)]
    body = (f'{_filters(listed)}<h2>Failing CI on the newest sweep ({len(now)})</h2>'
            f'<table id="regressions"><tr>{head}</tr>{_regression_rows(now, current, "regressed")}</table>'
            f'<h2>Suspected on the newest sweep, not failing yet ({len(watched)})</h2>'
            f'<table id="suspected"><tr>{head}</tr>{_regression_rows(watched, current, "suspected")}</table>'
            f'<h2>Past confirmed steps down ({len(older)})</h2>'
            f'<table id="past"><tr>{past_head}</tr>{past_rows}</table>')
    return _page(title, "Regressions", body)


def _regression_rows(listed: Sequence, current: Callable, css: str) -> str:
    rows = []
    for e in listed:
        s, step = e.series, current(e.series)
        rows.append(f'<tr data-series{_attributes(e)} class="{css}"><td>{_link(e)}</td><td>{escape(s.machine)}</td>'
                    f'<td>{escape(s.verdict.sweep_id)}</td><td>{_verdict(s)}</td>'
                    f'<td class="num">{s.verdict.p_value:.2g}</td><td>{escape(s.verdict.note)}</td>'
                    f'<td>{_provenance(step.causes if step else ())}</td></tr>')
    return "".join(rows)
