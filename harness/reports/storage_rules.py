"""The page cache and MLPerf Storage's rules in the report: per storage configuration, whether its reads
could have come from the page cache (DLIO's ``potential_caching``) and, under ``rules = "mlperf_storage"``,
the set's verdict (its last run's row), the rules' AU and samples/s beside ours."""

from __future__ import annotations

import json

import pandas as pd

from harness.contract.axes import Rules, Status

KEYS = ["framework", "storage", "world_size"]


def storage_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One line per storage configuration with real data: runs, runs that could have been served from the
    page cache (and one's reason), how the cache was emptied, and under the rules the set's verdict, with
    the means over the runs after the warm-up run of the rules' AU and samples/s and of ours."""
    real = table[table["page_cache_drop"].notna()]
    lines = []
    for key, runs in real.groupby(KEYS, sort=True):
        runs = runs.sort_values("repeat")
        cached = runs[runs["potential_caching"].fillna(False).astype(bool)]
        line = dict(zip(KEYS, key), runs=len(runs), potentially_cached=len(cached),
                    why=(cached if len(cached) else runs)["potential_caching_why"].iloc[-1],
                    drop=", ".join(sorted(set(runs["page_cache_drop"]))))
        mine = runs[runs["rules"] == Rules.MLPERF_STORAGE.value]
        if len(mine):
            results = mine[(mine["repeat"] > 0) & (mine["status"] == Status.OK.value)]
            last = mine.iloc[-1]
            line.update(compliant=bool(last["mlperf_compliant"]) if pd.notna(last["mlperf_compliant"]) else False,
                        violations=json.loads(last["mlperf_violations"]) if pd.notna(last["mlperf_violations"]) else [],
                        au_rules=results["au_rules"].mean(), au=results["au"].mean(),
                        throughput_rules=results["throughput_rules"].mean(), throughput=results["throughput"].mean())
        lines.append(line)
    return pd.DataFrame(lines)


def storage_summary_items(table: pd.DataFrame) -> list:
    """The storage summary as a rich table, then each non-compliant set's broken rules (rich renderables,
    nothing where the sweep read no real data)."""
    from harness.base.escaping import terminal as escape
    from rich.table import Table
    from rich.text import Text

    summary = storage_summary(table)
    if summary.empty:
        return []
    rules = "compliant" in summary
    out = Table(title="page cache: could the reads have come from memory (DLIO's potential_caching)"
                      + ("; MLPerf Storage's rules: the set's verdict, means over the runs after its warm-up run"
                         if rules else ""))
    headers = ["framework", "storage", "world", "cached?", "emptied", "why"]
    if rules:
        headers += ["MLPerf", "AU (rules)", "AU (ours)", "samples/s (rules)", "samples/s (ours)"]
    for name in headers:
        out.add_column(name, justify="left" if name in ("framework", "storage", "why", "emptied", "MLPerf") else "right")
    for r in summary.to_dict("records"):
        cells = [r["framework"], r["storage"], str(r["world_size"]), f"{r['potentially_cached']}/{r['runs']}",
                 r["drop"], escape(str(r["why"]))]
        if rules:
            cells += (["compliant" if r.get("compliant") else "[red]no[/red]"]
                      + [_fmt(r.get(k), pct) for k, pct in (("au_rules", True), ("au", True),
                                                             ("throughput_rules", False), ("throughput", False))])
        out.add_row(*cells)
    return [out, *(Text.from_markup(f"[yellow]{r['framework']} {r['storage']} x{r['world_size']}: not "
                                    f"MLPerf-compliant[/yellow] - {escape(violation)}")
                   for r in summary.to_dict("records") for violation in r.get("violations") or [])]


def _fmt(value, pct: bool) -> str:
    if value is None or pd.isna(value):
        return "-"
    return f"{value:.1%}" if pct else f"{value:.1f}"
