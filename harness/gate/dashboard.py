"""``rosetta dashboard``: a static site of every series' history, like ``asv publish``.

Written into one folder, to be opened from disk or served as plain files: ``index.html`` (every series:
its dimensions, newest figure and verdict, its minimum detectable effect and canary, whether it is stale,
a small chart; filters), ``regressions.html`` (the series whose newest sweep failed ``rosetta history``'s
gate, those with a suspected step down, and past confirmed steps down),
one ``series-<id>.html`` per series (its chart with levels, steps, outliers and trends, and the provenance
that changed at each step), ``dashboard.css`` and ``dashboard.js``. Nothing is fetched from elsewhere.

The statistics are :mod:`harness.gate.history`'s (this module only selects and lays out); the pages are
:mod:`harness.gate.dashboard_pages`, the charts :mod:`harness.gate.dashboard_svg`.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Sequence

import pandas as pd

from harness.base import nofollow
from harness.gate import dashboard_assets, dashboard_pages
from harness.gate.history import Series, Step

DIMENSIONS = ("framework", "workload", "storage", "strategy")  # the index's filters, besides machine and verdict


@dataclass(frozen=True)
class Freshness:
    """When the site is judged (UTC) and after how many days without a new sweep a series is stale."""

    as_of: datetime
    stale_days: float = 7.0

    def age_days(self, s: Series) -> float:
        """Days from the series' newest sweep to ``as_of`` (NaN: its time is not readable)."""
        try:
            newest = pd.Timestamp(s.points[-1].timestamp) if s.points else None
        except ValueError:  # a timestamp that is not one: not judged for staleness
            return math.nan
        if newest is None or pd.isna(newest):
            return math.nan
        newest = newest if newest.tzinfo else newest.tz_localize("UTC")
        return (pd.Timestamp(self.as_of) - newest).total_seconds() / 86400


@dataclass(frozen=True)
class Entry:
    """One series as the pages show it: the series, its page's file name and its dimensions' values."""

    series: Series
    page: str  # file name of its page, e.g. series-0a1b2c3d4e5f.html
    dimensions: dict  # DIMENSIONS -> value (text)
    age_days: float = math.nan  # days since its newest sweep (NaN: not judged for staleness)
    stale_days: float = math.inf

    @property
    def stale(self) -> bool:
        """No new sweep for more than the stale days."""
        return math.isfinite(self.age_days) and self.age_days > self.stale_days

    @property
    def latest(self):
        """The newest sweep with a figure (samples/s), or None."""
        judged = [p for p in self.series.points if math.isfinite(p.rate)]
        return judged[-1] if judged else None


def page_name(s: Series) -> str:
    """A file name per series, stable across runs and free of the data's characters."""
    digest = hashlib.sha1(f"{s.config_id}\0{s.machine}".encode()).hexdigest()[:12]
    return f"series-{digest}.html"


def dimensions(table: pd.DataFrame) -> dict[str, dict[str, str]]:
    """config_id -> each of DIMENSIONS as text (from the configuration's first row)."""
    present = [d for d in DIMENSIONS if d in table.columns]
    first = table.drop_duplicates("config_id")[["config_id", *present]]
    return {str(row["config_id"]): {d: str(row.get(d, "")) for d in DIMENSIONS} for row in first.to_dict("records")}


def entries(all_series: Sequence[Series], dims: dict[str, dict[str, str]],
            freshness: Freshness | None = None) -> list[Entry]:
    """The series in the index's order: regressions first, then by label and machine."""
    ordered = sorted(all_series, key=lambda s: (not s.verdict.fails, s.label, s.machine))
    return [Entry(s, page_name(s), dims.get(s.config_id, {d: "" for d in DIMENSIONS}),
                  freshness.age_days(s) if freshness else math.nan, freshness.stale_days if freshness else math.inf)
            for s in ordered]


def current_step(s: Series) -> Step | None:
    """The step the newest sweep's regression is about: the one it confirmed, or the suspected one."""
    if s.verdict.verdict != "regression" or not s.verdict.step:
        return None
    candidates = [st for st in s.steps if st.direction == "down" and st.sweep_id == s.verdict.step]
    return candidates[-1] if candidates else None


def suspected(s: Series) -> bool:
    """The newest sweeps of the series depart downwards: a suspected step down, not (yet) failing CI."""
    return s.verdict.verdict == "regression" and s.verdict.status == "suspected"


def past_steps_down(s: Series) -> list[Step]:
    """Confirmed steps down of the series other than the one its newest sweep's verdict is about (a drift's
    first step, not its later ones)."""
    now = current_step(s)
    return [st for st in s.steps if st.direction == "down" and st.verdict == "confirmed" and not st.drift
            and st is not now]


def write(all_series: Sequence[Series], table: pd.DataFrame, out: Path, title: str,
          freshness: Freshness | None = None) -> Path:
    """Write the site into ``out`` (created); return the index page's path. ``freshness``: flag the series
    with no sweep for its days as stale."""
    out = nofollow.make_folder(out)
    listed = entries(all_series, dimensions(table), freshness)
    # a page's name may be a link someone planted in the folder: it is refused, not written through
    nofollow.write(out / "dashboard.css", dashboard_assets.CSS)
    nofollow.write(out / "dashboard.js", dashboard_assets.JS)
    nofollow.write(out / "index.html", dashboard_pages.index(listed, title))
    nofollow.write(out / "regressions.html", dashboard_pages.regressions(
        listed, title, current_step, past_steps_down, suspected))
    for stale in set(out.glob("series-*.html")) - {out / e.page for e in listed}:
        stale.unlink()  # a series an earlier run wrote that this one does not have: not left to mislead
    for entry in listed:
        nofollow.write(out / entry.page, dashboard_pages.series_page(entry, title))
    return out / "index.html"
