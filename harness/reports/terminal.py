"""The summary as terminal tables (rich): units in the headers, the runs not measured with their reasons."""

from __future__ import annotations

import math

import pandas as pd

from harness.reports.aggregate import CONFIG_KEYS, NUMERICS, compares_strategies
from harness.results import metrics


def print_table(summary: pd.DataFrame, console=None) -> None:
    """Print :func:`summary_items` (on a console of the terminal's width unless one is given)."""
    from rich.console import Console

    console = console or Console()
    for item in summary_items(summary):
        console.print(item)


def summary_items(summary: pd.DataFrame) -> list:
    """The summary as a rich table (columns with one value across it folded into the title), then the
    notes under it: superlinear efficiency, the wrapper's cost, the configurations that were not measured
    with their reasons. Rich renderables, in order, for a console to print."""
    from harness.base.escaping import terminal as escape
    from rich.table import Table
    from rich.text import Text

    cells = _cells(summary)
    rendered = {name: [fn(r) for _, r in summary.iterrows()] for name, fn in cells.items()}
    foldable = ("framework", "batch/worker", "strategy", "storage", *NUMERICS, "device")
    constant = [n for n in foldable if len(summary) > 1 and len(set(rendered[n])) == 1]
    # the config id, only where lines differ in nothing else shown (a seed, an option)
    hidden = [] if "config_id" in summary and summary.duplicated([k for k in CONFIG_KEYS if k in summary]).any() \
        else ["config"]
    title = ("samples/s: median over repeats of global samples / slowest rank's measured time\n"
             + metrics.INTERVAL_HOW)
    used = sorted(set(summary["efficiency_baseline"].dropna())) if "efficiency_baseline" in summary else []
    if used and "efficiency" in cells:
        title += "\nefficiency vs " + "; ".join(escape(u) for u in used)
    if constant:
        title += "\n" + ", ".join(f"{n} = {rendered[n][0]}" for n in constant)
    table = Table(title=title)
    columns = [n for n in cells if n not in constant and n not in hidden]
    for name in columns:
        table.add_column(name, justify="left" if name in ("framework", "workload", "strategy", "storage",
                                                          "device", "unit", "weights") else "right")
    for i in range(len(summary)):
        table.add_row(*(rendered[name][i] for name in columns))
    items: list = [table]
    if (summary["efficiency"] > SUPERLINEAR).any():
        items.append(Text.from_markup(
            f"[red]![/red] efficiency above {SUPERLINEAR:.0%}: more than linear scaling is not expected from "
            "data parallelism; the smaller run was probably slowed by other load (compare its repeats' "
            "spread) - do not trust these figures"))
    items += utilization_note_items(summary)
    items += [Text(line) for line in wrapper_cost_lines(summary)]
    items += busy_items(summary)
    items += [Text.from_markup(f"[yellow]{escape(r['framework'])} {escape(r['workload'])}/{escape(r['size'])} world "
                               f"{escape(r['world_size'])}: {escape(r['status'])}[/yellow] - {escape(r['reason'])}")
              for _, r in summary[summary["reason"].notna()].iterrows()]
    return items


def _cells(summary: pd.DataFrame) -> dict:
    """The summary's columns: each a function from a summary row to its cell's text (rich markup; every
    string of the table through :func:`harness.base.escaping.terminal`)."""
    from harness.base.escaping import terminal as escape

    cells = {
        "framework": lambda r: escape(r["framework"]),
        "config": lambda r: escape(str(r.get("config_id"))[:8]),
        "workload": lambda r: escape(f"{r['workload']}/{r['size']}"),
        "world": lambda r: f"{r['nodes']}x{r['procs_per_node']}",
        "batch/worker": lambda r: str(r["batch_per_worker"]),
        "strategy": lambda r: escape(r["strategy"]),
        "storage": lambda r: escape(r["storage"]),
        **{key: (lambda r, key=key: escape(r[key])) for key in NUMERICS},
        "device": lambda r: escape(r["device"]),
        "ok/runs": lambda r: f"{r['ok']}/{r['runs']}",
        "samples/s": lambda r: (f"{r['throughput_median']:.1f}{busy_mark(r)}" if not math.isnan(r["throughput_median"])
                                else f"[red]{escape(r['status'])}[/red]"),
        "unit": lambda r: escape(r["sample_unit"]),
        "spread": _interval,
        "step p50 ms": lambda r: _ms(r["step_p50_s"]),
        "step p90 ms": lambda r: _ms(r["step_p90_s"]),
        "efficiency": _efficiency,
        "MFU": lambda r: mfu_text(r.get("mfu", math.nan)),
        "peak MiB": _peak_memory,
        "weights": lambda r: {True: "same", False: "[red]DIFFER[/red]", None: "-"}[r["weights_consistent"]],
    }
    if compares_strategies(summary):
        cells.update({
            "bytes/step": lambda r: _bytes(r["bytes_per_step"]),
            "vs fp32": lambda r: "-" if math.isnan(r["compression_ratio"]) else f"{r['compression_ratio']:.1f}x",
            "to target s": _to_target,
            "steps": lambda r: "-" if math.isnan(r["steps_to_target"]) else f"{r['steps_to_target']:.0f}",
            "final acc": lambda r: "-" if math.isnan(r["final_accuracy"]) else f"{r['final_accuracy']:.3f}",
        })
        cells.pop("efficiency")
        if summary["staleness_max"].notna().any():  # asynchronous strategies ran: updates landing in between
            cells["staleness mean/max"] = lambda r: ("-" if math.isnan(r["staleness_max"])
                                                     else f"{r['staleness_mean']:.2f}/{r['staleness_max']:.0f}")
    return cells


# An MFU above this cannot be: every MFU shown above it carries MFU_FLAG.
MFU_IMPOSSIBLE = 1.0
MFU_FLAG = "MFU>100%: peak table wrong?"


def mfu_text(mfu: float) -> str:
    """MFU as a percentage; above 100% it is flagged in the cell (and explained under the table)."""
    if mfu is None or math.isnan(mfu):
        return "-"
    text = f"{mfu:.1%}" if mfu < 0.1 else f"{mfu:.0%}"
    return f"[red]{text}![/red]" if mfu > MFU_IMPOSSIBLE else text


def _peak_memory(r: pd.Series) -> str:
    """The largest rank's peak resident memory (MiB), and its accelerator memory reserved where it had one."""
    rss, gpu = r.get("peak_rss_mb", math.nan), r.get("peak_gpu_reserved_mb", math.nan)
    text = "-" if rss is None or math.isnan(rss) else f"{rss:.0f}"
    return text if gpu is None or math.isnan(gpu) else f"{text} (GPU {gpu:.0f})"


def utilization_note_items(summary: pd.DataFrame) -> list:
    """What MFU is measured against, and the flag for an MFU above 100% (a wrong peak or FLOP count)."""
    from rich.text import Text

    if "mfu" not in summary or summary["mfu"].isna().all():
        return []
    sources = sorted(set(summary["peak_source"].dropna()))
    items = [Text("MFU: model FLOPs (3 x forward, layer by layer) x samples/s / dense peak of the devices; "
                  "peak: " + "; ".join(sources))]
    items += [Text.from_markup(f"[red]! {MFU_FLAG}[/red] {r['framework']} {r['workload']}/{r['size']} world "
                               f"{r['world_size']}: {r['mfu']:.0%} of {r['peak_source']}")
              for _, r in summary[summary["mfu"] > MFU_IMPOSSIBLE].iterrows()]
    return items


def wrapper_cost_lines(summary: pd.DataFrame) -> list[str]:
    """The distributed wrapper's own cost: its world-size-1 throughput against the plain loop's."""
    if "wrapper_cost" not in summary:
        return []
    return [f"wrapper's cost: {r['framework']} {r['workload']}/{r['size']} b{r['batch_per_worker']} at world "
            f"size 1 ran at {r['wrapper_cost']:.0%} of the plain single-device loop "
            f"({r['throughput_median']:.1f} vs {r['plain_throughput']:.1f} {r['sample_unit']}/s)"
            for _, r in summary[summary["wrapper_cost"].notna()].iterrows()]


def compares_frameworks(summary: pd.DataFrame) -> bool:
    """Whether a sweep ran more than one framework (then the report sets them side by side)."""
    return not summary.empty and summary["framework"].nunique() > 1


def frameworks_side_by_side(summary: pd.DataFrame) -> pd.DataFrame:
    """Samples/s (median over repeats) with one column per framework, one row per configuration
    that frameworks share (workload, size, batch per worker, world size and any other varying
    dimension but the launcher, which goes with the framework), and ``best/worst``: the ratio of
    the fastest framework's throughput to the slowest's. Cells of configurations a framework did
    not measure hold its status (``skipped``, ``failed``)."""
    shared = ["workload", "size", "batch_per_worker", "world_size"]
    shared += [k for k in ["strategy", "storage", "network", "precision", "memory_format", "compile"]
               if summary[k].nunique() > 1]
    # a run skipped before launch knows only the device it asked for ("auto"): device splits rows only
    # where the measured runs differ in it
    if summary.loc[summary["throughput_median"].notna(), "device"].nunique() > 1:
        shared.append("device")
    rows = []
    for keys, group in summary.groupby(shared, sort=True, dropna=False):
        row = dict(zip(shared, keys))
        measured = group["throughput_median"].dropna()
        for _, r in group.iterrows():
            row[r["framework"]] = (f"{r['throughput_median']:.1f}" if not math.isnan(r["throughput_median"])
                                   else r["status"])
        row["best/worst"] = (f"{measured.max() / measured.min():.2f}x" if len(measured) > 1 and measured.min() > 0
                             else "-")
        rows.append(row)
    table = pd.DataFrame(rows)
    names = sorted(summary["framework"].unique())
    return table[shared + names + ["best/worst"]].fillna("-")


def frameworks_table(summary: pd.DataFrame):
    """The side-by-side framework table (:func:`frameworks_side_by_side`) as a rich table."""
    from harness.base.escaping import terminal as escape
    from rich.table import Table

    side = frameworks_side_by_side(summary)
    table = Table(title="frameworks side by side: samples/s, median over repeats (same workload, data, recipe)")
    for name in side.columns:
        table.add_column(escape(name), justify="right" if name not in ("workload", "size") else "left")
    for _, r in side.iterrows():
        table.add_row(*(escape(v) for v in r))
    return table


def _bytes(value: float) -> str:
    if math.isnan(value):
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def _to_target(r: pd.Series) -> str:
    """Median seconds to the target over the repeats that reached it, and how many did."""
    if r["evaluated"] == 0:
        return "-"
    if r["reached"] == 0:
        return f"[red]not reached[/red] ({r['target_accuracy']:.0%})"
    note = "" if r["reached"] == r["evaluated"] else f" ({r['reached']}/{r['evaluated']})"
    return f"{r['time_to_target_s']:.2f}{note}"


# Scaling efficiency above this is flagged: the smaller run was disturbed, not the larger one superlinear.
SUPERLINEAR = 1.05


def _efficiency(r: pd.Series) -> str:
    if math.isnan(r["efficiency"]):
        return "-"
    text = f"{r['efficiency']:.0%}"
    return f"[red]{text}![/red]" if r["efficiency"] > SUPERLINEAR else text


def _interval(r: pd.Series) -> str:
    return metrics.interval_text(r["interval_low"], r["interval_high"], r["interval_kind"], r["ok"])


BUSY_MARK = "[yellow]*[/yellow]"


def busy_mark(row: pd.Series) -> str:
    return BUSY_MARK if row.get("busy", 0) else ""


def busy_items(summary: pd.DataFrame) -> list:
    """A footnote per configuration with repeats measured on a busy machine (marked * in the table)."""
    from harness.base.escaping import terminal as escape
    from rich.text import Text

    if "busy" not in summary:
        return []
    return [Text.from_markup(f"{BUSY_MARK} {r['framework']} {r['workload']}/{r['size']} world {r['world_size']}: "
                             f"{r['busy']} of {r['ok']} repeats measured on a busy machine "
                             f"({escape(str(r['busy_note']))}); its figures are not this code's alone")
            for _, r in summary[summary["busy"] > 0].iterrows()]


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f}"
