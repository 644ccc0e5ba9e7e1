"""``rosetta reproduce NAME``: run a published reference's scenario at this machine's scale and
set the measurement beside the published figures.

Hardware differs, so what is compared is what transfers: the scaling-efficiency
curve (and ratios between series, where both sides have several), with absolute
throughput beside it for scale only. The written report says in words what was
and was not reproduced.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from harness.base.errors import UserError
from harness.experiment import scenario
from harness.reports import aggregate, charts
from harness.reproduction.reference import Reference
from harness.results import metrics

PREDICTED = "predicted"  # the source of the scaling model's rows (harness.reproduction.prediction)

EFF_AXIS_TOP = 130  # % : the efficiency axis; values beyond it are drawn at the edge, labelled


def scenario_for(ref: Reference, overrides: Mapping[str, Any] | None = None) -> scenario.Scenario:
    """The reference's ``[reproduce]`` scenario, validated like any scenario file; ``overrides``
    may set ``repeats``, ``warmup_steps``, ``measured_steps`` (settings), ``size`` and ``launcher`` (matrix:
    e.g. the SparkNet row's ranks inside Spark, ``launcher = "spark"``)."""
    if not ref.reproduce.scenario:
        raise UserError(f"{ref.id}: no scenario runs here: {ref.reproduce.not_reproduced or 'none given'}")
    doc = {k: dict(v) if isinstance(v, Mapping) else v for k, v in ref.reproduce.scenario.items()}
    doc["name"] = f"reproduce-{ref.id}"
    doc.setdefault("settings", {})
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key in ("size", "launcher"):
            doc["matrix"][key] = value
        else:
            doc["settings"][key] = value
    fit_warmup(doc["settings"])
    return scenario.parse(doc, f"{ref.path} [reproduce]", default_name=doc["name"])


def fit_warmup(settings: dict[str, Any]) -> None:
    """Fewer warm-up steps where measured steps were cut below them (a scenario needs warm-up < measured)."""
    if settings.get("warmup_steps", 0) >= settings.get("measured_steps", 1):
        settings["warmup_steps"] = max(0, settings.get("measured_steps", 1) - 1)


def measured_series(summary: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Measured rows grouped into curves (label -> rows sorted by world size)."""
    if "throughput_median" not in summary or summary.empty:
        return {}
    measured = summary[summary["throughput_median"].notna()]
    keys = [k for k in aggregate.SERIES_KEYS if k != "sweep_id"]
    out = {}
    for _, rows in measured.groupby(keys, dropna=False):
        r = rows.iloc[0]
        precision = "" if r.get("precision") in (None, "fp32", aggregate.UNKNOWN) else f" {r['precision']}"
        label = (f"measured: {r['framework']} {r['strategy']} {r['workload']}/{r['size']} b{r['batch_per_worker']}"
                 f"{precision} ({r['device']})")
        if r.get("efficiency_baseline") == aggregate.PLAIN_BASELINE:
            label += ", eff. vs plain 1-device loop"
        if measured["scenario"].nunique() > 1:  # a scenario per set of series (--at emulated): say whose curve
            label += f" [{r['scenario']}]"
        out[label] = rows.sort_values("world_size")
    return out


def comparison_table(ref: Reference, summary: pd.DataFrame, predicted: pd.DataFrame | None = None) -> pd.DataFrame:
    """Tidy rows (source, series, workers, throughput, unit, efficiency, spread, error_pp) of the published
    figures, the measured ones (spread: the interval over repeats, in words) and the scaling model's
    ``predicted`` rows (error_pp: predicted minus published efficiency, percentage points)."""
    rows = []
    for s in ref.series:
        for i, (n, eff) in enumerate(zip(s.gpus, s.efficiencies())):
            rows.append({"source": "published", "series": s.label, "workers": n,
                         "throughput": s.throughput[i] if s.throughput else math.nan, "unit": ref.unit,
                         "efficiency": eff})
    for label, data in measured_series(summary).items():
        for _, r in data.iterrows():
            rows.append({"source": "measured", "series": label, "workers": int(r["world_size"]),
                         "throughput": float(r["throughput_median"]), "unit": f"{r['sample_unit']}/s",
                         "efficiency": float(r["efficiency"]),
                         "spread": metrics.interval_text(r["interval_low"], r["interval_high"],
                                                         r["interval_kind"], r["ok"])})
    table = pd.DataFrame(rows)
    if predicted is not None and len(predicted):
        table = pd.concat([table, predicted.drop(columns=["published_efficiency"])], ignore_index=True)
    for column in ("spread", "error_pp"):
        if column not in table:
            table[column] = math.nan
    return table


def ratios(table: pd.DataFrame, source: str, pairs: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """Efficiency ratios between series at shared worker counts > 1, in words: the given
    (numerator, denominator) pairs, or every series against the first. With a shared base (the
    same 1-GPU figure) this is also the throughput ratio."""
    data = table[(table["source"] == source) & table["efficiency"].notna()]
    labels = list(dict.fromkeys(data["series"]))
    if not pairs:
        pairs = tuple((label, labels[0]) for label in labels[1:])
    lines = []
    for num, den in pairs:
        a = data[data["series"] == num].set_index("workers")["efficiency"]
        b = data[data["series"] == den].set_index("workers")["efficiency"]
        shared = [n for n in a.index if n in b.index and n > 1]
        if shared:
            lines.append(f"{num} / {den}: " + ", ".join(f"{a[n] / b[n]:.2f} at {n}" for n in shared))
    return lines


_STYLES = {"measured": {"linestyle": "-", "linewidth": 2.5, "marker": "s"},
           "published": {"linestyle": "--", "linewidth": 1.2, "marker": "o"},
           PREDICTED: {"linestyle": ":", "linewidth": 1.5, "marker": "x"}}


def plot(ref: Reference, table: pd.DataFrame, path: Path) -> Path:
    """Left: scaling efficiency vs workers, published (dashed) and measured (solid, thick).
    Right: absolute throughput on a log scale, for scale only (different hardware)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_eff, ax_abs) = plt.subplots(1, 2, figsize=(13, 5))
    colours: dict[str, str] = {}  # a published series and its prediction share a colour
    for (source, label), data in table.groupby(["source", "series"], sort=False):
        data = data.sort_values("workers")
        style = _STYLES[source]
        name = label if source == "measured" else f"{source}: {label}"
        # points beyond the axis (a disturbed smallest run) are drawn at its top edge and labelled
        shown = (data["efficiency"] * 100).clip(upper=EFF_AXIS_TOP - 5)
        line = ax_eff.plot(data["workers"], shown, label=name, color=colours.get(label), **style)
        colours.setdefault(label, line[0].get_color())
        for (_, r), y in zip(data.iterrows(), shown):
            if math.isnan(r["efficiency"]) or (source == PREDICTED and r["workers"] == data["workers"].min()):
                continue
            text = f"{r['efficiency']:.0%}" + (" (off scale: disturbed run?)" if y < r["efficiency"] * 100 else "")
            if source == PREDICTED:
                text = f"model {text} ({r['error_pp']:+.0f} pp)"
            ax_eff.annotate(text, (r["workers"], y), textcoords="offset points",
                            xytext=(3, -10 if source == PREDICTED else 4), fontsize=7, color=line[0].get_color())
        if data["throughput"].notna().any():
            ax_abs.plot(data["workers"], data["throughput"], label=f"{name} [{data['unit'].iloc[0]}]", **style,
                        color=line[0].get_color())
    ax_eff.axhline(100, color="grey", linewidth=1)
    ax_eff.set_ylim(0, EFF_AXIS_TOP)
    ax_eff.set_ylabel("scaling efficiency (% of linear from the smallest count)")
    ax_eff.set_title("What transfers: scaling efficiency (model: predicted from the published 1-GPU figure\n"
                     "and the stated interconnect; pp = predicted minus published)", fontsize=9)
    ax_abs.set_yscale("log")
    ax_abs.set_ylabel(f"throughput ({ref.unit} published; measured unit in legend)")
    ax_abs.set_title("For scale only: absolute throughput (different hardware)")
    for ax in (ax_eff, ax_abs):
        charts.count_axis(ax, table["workers"], "GPUs (published) / worker processes (measured)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{ref.id}: {ref.title}\npublished: {ref.configuration.hardware}; "
                 f"measured: this machine", fontsize=10)
    return charts.save_figure(fig, path)


def prediction_lines(table: pd.DataFrame) -> list[str]:
    """The scaling model against each published curve: predicted vs published efficiency per point."""
    lines = []
    predicted = table[table["source"] == PREDICTED]
    for label, data in predicted.groupby("series", sort=False):
        beyond = data[data["workers"] > data["workers"].min()].sort_values("workers")
        points = ", ".join(f"{r.efficiency:.0%} vs {r.efficiency - r.error_pp / 100:.0%} at {r.workers} "
                           f"({r.error_pp:+.1f} pp)" for r in beyond.itertuples())
        if points:
            lines.append(f"Model vs published ({label}): {points}.")
    if len(predicted):
        beyond = predicted[predicted.groupby("series")["workers"].transform("min") < predicted["workers"]]
        lines.append(f"The model's mean absolute error against the published curve: "
                     f"{beyond['error_pp'].abs().mean():.1f} percentage points over {len(beyond)} point(s) "
                     "(no overlap of communication with compute assumed: a lower bound where the source overlaps).")
    return lines


def input_lines(ref: Reference) -> list[str]:
    """What the published runs read, where it was not synthetic data: the figures beside them had no input
    pipeline (the model has none; this harness's runs of the reference read synthetic data)."""
    if ref.published is None or not ref.published.source_input:
        return []
    return [f"Published with real input ({ref.published.source_input}); Rosetta's runs of it read synthetic "
            "data and the scaling model has no input pipeline, so where the source's hosts could not feed their "
            "GPUs (the fastest steps first), both read high."]


def strategy_lines(summary: pd.DataFrame | None) -> list[str]:
    """Each strategy against allreduce at the same worker count, as ratios: throughput (speed-up),
    bytes on the wire per step and time to the target accuracy."""
    if summary is None or summary.empty or summary["strategy"].nunique() < 2:
        return []
    lines = []
    for world, rows in summary.groupby("world_size"):
        base = rows[rows["strategy"] == "allreduce"]
        if base.empty or world < 2:  # one worker exchanges nothing
            continue
        b = base.iloc[0]
        for _, r in rows[rows["strategy"] != "allreduce"].iterrows():
            parts = [f"{name} {r[col] / b[col]:.2f}x" for name, col in
                     (("throughput", "throughput_median"), ("bytes per step", "bytes_per_step"),
                      ("time to target", "time_to_target_s")) if r[col] > 0 and b[col] > 0]
            if parts:
                lines.append(f"{r['strategy']} / allreduce at {world} worker(s): " + ", ".join(parts) + ".")
    return lines


def baseline_lines(summary: pd.DataFrame | None) -> list[str]:
    """Which throughput efficiency divides by, and the distributed wrapper's cost where both were measured."""
    if summary is None or "efficiency_baseline" not in summary:
        return []
    lines = [f"Efficiency is against {b}." for b in sorted(set(summary["efficiency_baseline"].dropna()))]
    for _, r in summary[summary["wrapper_cost"].notna()].iterrows():
        lines.append(f"The wrapper's cost: {r['framework']} at world size 1 ran at {r['wrapper_cost']:.0%} of the "
                     f"plain single-device loop ({r['throughput_median']:.1f} vs {r['plain_throughput']:.1f} "
                     f"{r['sample_unit']}/s), as published 1-GPU figures are measured.")
    return lines


def findings(ref: Reference, table: pd.DataFrame, summary: pd.DataFrame | None = None,
             reduced_run: bool = True) -> list[str]:
    """What was and was not reproduced, in plain sentences (``reduced_run``: the sweep is the reference's
    reduced run, whose notes on what transfers then apply)."""
    lines = prediction_lines(table) + input_lines(ref) + strategy_lines(summary) + baseline_lines(summary)
    measured = table[table["source"] == "measured"]
    published = table[table["source"] == "published"]
    if measured.empty:
        return lines + ["Nothing was measured (every run failed or was skipped); nothing is reproduced."]
    top = int(measured["workers"].max())
    for label in dict.fromkeys(measured["series"]):
        data = measured[measured["series"] == label].sort_values("workers")
        effs = ", ".join(f"{r.efficiency:.0%} at {r.workers}" for r in data.itertuples() if r.workers > data["workers"].min())
        lines.append(f"Measured scaling efficiency ({label}): {effs or 'only one worker count measured'}.")
        if (data["efficiency"] > 1.1).any():
            lines.append("A measured efficiency above 110% means the smallest run was slowed by other load on "
                         "this machine; rerun with more repeats before reading the curve.")
    for label in dict.fromkeys(published["series"]):
        data = published[published["series"] == label].sort_values("workers")
        same = data[data["workers"] == top]
        beyond = data[data["workers"] > top]
        if len(same) and same["workers"].iloc[0] > data["workers"].min():
            lines.append(f"Published {label} at the same count ({top}): {same['efficiency'].iloc[0]:.0%}.")
        elif len(beyond):
            r = beyond.iloc[0]
            lines.append(f"Published {label}: no point at {top}; its nearest larger count is {int(r['workers'])} "
                         f"at {r['efficiency']:.0%} (not the same count: compare the shape only).")
    pub_base = published[published["throughput"].notna()].sort_values("workers")
    mea_base = measured.sort_values("workers")
    if len(pub_base):
        p, m = pub_base.iloc[0], mea_base.iloc[0]
        lines.append(f"Absolute throughput is not comparable: published {p['throughput']:,.1f} {p['unit']} at "
                     f"{int(p['workers'])} GPU(s) vs measured {m['throughput']:,.1f} {m['unit']} at "
                     f"{int(m['workers'])} worker(s) here; shown for scale only.")
    pub_ratios, mea_ratios = ratios(table, "published", ref.ratios), ratios(table, "measured")
    if pub_ratios:
        lines.append("Published efficiency ratios between series: " + "; ".join(pub_ratios) + ".")
        lines.append("Measured efficiency ratios: " + ("; ".join(mea_ratios) + "." if mea_ratios else
                                            "none: only one series was measured here, so the published ratio "
                                            "is not reproduced."))
    if reduced_run:
        lines.append(f"Transfers: {ref.reproduce.what_transfers}.")
        lines.append(f"Not reproduced: {ref.reproduce.not_reproduced}.")
    return lines


def write_markdown(ref: Reference, table: pd.DataFrame, chart: Path, path: Path, sweep_id: str,
                   summary: pd.DataFrame | None = None, extra_charts: Mapping[str, Path] | None = None,
                   notes: list[str] | None = None) -> Path:
    """A self-contained Markdown report: the facts of the reference, the chart, both tables, findings."""
    c = ref.configuration
    lines = [f"# Reproducing {ref.id}", "", f"**{ref.title}**", "",
             f"- source: {ref.source}" + (f" ({ref.url})" if ref.url else ""),
             f"- read from: {ref.read_from} ({ref.accuracy})",
             f"- published configuration: {c.hardware}; {c.model}; batch {c.batch}; {c.precision}; data {c.data}; "
             f"interconnect {c.interconnect}; software {c.software}",
             f"- measured here: sweep `{sweep_id}`", "", f"![measured vs published]({Path(chart).name})", "",
             "## What was and was not reproduced", ""]
    lines += [f"- {line}" for line in (findings(ref, table, summary) if notes is None else notes)]
    for title, png in (extra_charts or {}).items():
        lines += ["", f"## {title}", "", f"![{title}]({Path(png).name})"]
    lines += ["", "## Caveats of the published figures", ""] + [f"- {c}" for c in ref.caveats]
    lines += ["", "## Figures", "", (f"measured throughput: median over repeats; {metrics.INTERVAL_HOW}. "
                                      "model error: predicted minus published efficiency, percentage points."), "",
              "| source | series | workers | throughput | spread | unit | efficiency | model error |",
              "|---|---|---:|---:|---|---|---:|---:|"]
    for r in table.itertuples():
        tp = "-" if math.isnan(r.throughput) else f"{r.throughput:,.1f}"
        eff = "-" if math.isnan(r.efficiency) else f"{r.efficiency:.0%}"
        spread = r.spread if isinstance(r.spread, str) else "-"
        error = "-" if math.isnan(r.error_pp) else f"{r.error_pp:+.1f} pp"
        lines.append(f"| {r.source} | {r.series} | {r.workers} | {tp} | {spread} | {r.unit} | {eff} | {error} |")
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path
