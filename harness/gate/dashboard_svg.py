"""The dashboard's charts, drawn as SVG text (no library, no fonts or files fetched): one series' launches,
sweeps, levels and trends, its steps (confirmed dashed, suspected dotted; red down, green up) and outliers
(circled), on a y axis around the data in samples/s and an x axis of sweeps in time order.

Every string that comes from the data is escaped here (``harness.base.escaping.html``), since the SVG is inlined in HTML.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from harness.base.escaping import html as escape

from harness.gate.history import Series

DOWN_COLOUR, UP_COLOUR, LEVEL_COLOUR, SWEEP_COLOUR = "#c0392b", "#1e8449", "#e67e22", "#2471a3"


@dataclass(frozen=True)
class Frame:
    """The plotting area in pixels and the data ranges it maps: x is the sweep's position, y samples/s."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    sweeps: int
    low: float
    high: float
    position: Mapping[str, int] = field(default_factory=dict)  # sweep id -> its index on the x axis

    def x(self, index: float) -> float:
        span = max(self.sweeps - 1, 1)
        return self.left + (self.width - self.left - self.right) * (index / span if self.sweeps > 1 else 0.5)

    def y(self, value: float) -> float:
        return self.top + (self.height - self.top - self.bottom) * (self.high - value) / (self.high - self.low)


def _frame(s: Series, width: int, height: int, small: bool) -> Frame | None:
    """Around the data: the launches' and sweeps' figures and the levels, padded by a tenth of their range."""
    values = [r for p in s.points for r in (*p.launch_rates, p.rate) if math.isfinite(r)]
    values += [v for lv in s.levels for v in (lv.rate, lv.end_rate) if math.isfinite(v)]
    if not values:
        return None
    low, high = min(values), max(values)
    pad = max((high - low) * 0.1, abs(high) * 0.01, 1e-9)
    margins = (4, 4, 4, 4) if small else (70, 50, 24, 40)
    return Frame(width, height, *margins, sweeps=len(s.points), low=low - pad, high=high + pad,
                 position={p.sweep_id: i for i, p in enumerate(s.points)})


def chart(s: Series, width: int = 900, height: int = 320, small: bool = False) -> str:
    """The series as an SVG element (``small``: a sparkline of sweeps and levels for the index)."""
    frame = _frame(s, width, height, small)
    label = escape(f"throughput of {s.label} on {s.machine}")
    head = (f'<svg class="chart" role="img" aria-label="{label}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">')
    if frame is None:
        return head + f'<text x="8" y="{height // 2}" class="muted">nothing measured</text></svg>'
    parts = [head, '<rect class="plot" x="0" y="0" width="100%" height="100%" fill="#fff"/>']
    if not small:
        parts += _axes(s, frame)
    parts += _steps(s, frame, small)
    parts += _levels(s, frame, small)
    parts += _points(s, frame, small)
    parts.append("</svg>")
    return "".join(parts)


def _axes(s: Series, f: Frame) -> list[str]:
    """Five y ticks in samples/s, up to eight x ticks with the sweep's date and time (UTC; its id on hover)."""
    out = []
    for k in range(5):
        value = f.low + (f.high - f.low) * k / 4
        y = f.y(value)
        out.append(f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{value:.4g}</text>')
    every = max(1, math.ceil(len(s.points) / 8))
    ticks = list(range(0, len(s.points), every))
    ticks[-1] = len(s.points) - 1  # the newest sweep has its tick, in place of the last (nearer than `every`)
    for i in ticks:
        x, base, p = f.x(i), f.height - f.bottom, s.points[i]
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 4}" stroke="#888"/>'
                   f'<text x="{x:.1f}" y="{base + 16}" text-anchor="middle" class="tick">'
                   f'{escape(p.timestamp[5:16].replace("T", " "))}<title>{escape(p.sweep_id)}</title></text>')
    out.append(f'<text x="12" y="{f.top + (f.height - f.top - f.bottom) / 2:.0f}" class="tick" '
               f'transform="rotate(-90 12 {f.top + (f.height - f.top - f.bottom) / 2:.0f})" text-anchor="middle">'
               f'{escape(s.unit)}/s</text>')
    return out


def _levels(s: Series, f: Frame, small: bool) -> list[str]:
    """Each level or trend as a line from its first to its last sweep, a trend labelled with its slope."""
    out = []
    for lv in s.levels:
        x1, x2 = f.x(f.position[lv.first]), f.x(f.position[lv.last])
        y1, y2 = f.y(lv.rate), f.y(lv.end_rate)
        kind = "trend" if lv.slope else "level"
        out.append(f'<line class="{kind}" x1="{x1:.1f}" x2="{x2:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" '
                   f'stroke="{LEVEL_COLOUR}" stroke-width="{2 if small else 3}"/>')
        if lv.slope and not small:
            out.append(f'<text x="{x2:.1f}" y="{y2 + 16:.1f}" text-anchor="end" class="note" fill="{LEVEL_COLOUR}">'
                       f'trend {lv.slope:+.2%}/sweep</text>')
    return out


def _steps(s: Series, f: Frame, small: bool) -> list[str]:
    """A vertical line at each step's first sweep: dashed when confirmed, dotted when suspected (a drift's
    later steps are its trend's, not drawn)."""
    out = []
    for st in (st for st in s.steps if not st.drift):
        x = f.x(f.position[st.sweep_id] - 0.5) if f.position[st.sweep_id] else f.x(0)
        colour = DOWN_COLOUR if st.direction == "down" else UP_COLOUR
        dash = "6 4" if st.verdict == "confirmed" else "2 3"
        out.append(f'<line class="step {escape(st.verdict)} {escape(st.direction)}" x1="{x:.1f}" x2="{x:.1f}" '
                   f'y1="{f.top}" y2="{f.height - f.bottom}" stroke="{colour}" stroke-dasharray="{dash}"/>')
        if not small:
            out.append(f'<text x="{x + 4:.1f}" y="{f.top + 12}" class="note" fill="{colour}">'
                       f'{st.change:+.1%} {escape(st.verdict)}</text>')
    return out


def _points(s: Series, f: Frame, small: bool) -> list[str]:
    """Launches as grey dots, sweeps as blue dots, outliers circled in red."""
    out = []
    for i, p in enumerate(s.points):
        x = f.x(i)
        if not small:
            out += [f'<circle class="launch" cx="{x:.1f}" cy="{f.y(r):.1f}" r="2" fill="#aaa"/>'
                    for r in p.launch_rates if math.isfinite(r)]
        if math.isfinite(p.rate):
            out.append(f'<circle class="sweep" cx="{x:.1f}" cy="{f.y(p.rate):.1f}" r="{2 if small else 4}" '
                       f'fill="{SWEEP_COLOUR}"><title>{escape(p.sweep_id)}: {p.rate:.4g} {escape(s.unit)}/s'
                       f'</title></circle>')
        elif not small:  # not judged (busy, nothing measured): a cross on the axis, why on hover
            y = f.height - f.bottom - 6
            out.append(f'<path class="not-judged" d="M{x - 4:.1f},{y - 4} l8,8 m0,-8 l-8,8" stroke="#999" '
                       f'stroke-width="1.5"><title>{escape(p.sweep_id)}: {escape(p.label)}</title></path>')
        if p.sweep_id in s.outliers and math.isfinite(p.rate):
            out.append(f'<circle class="outlier" cx="{x:.1f}" cy="{f.y(p.rate):.1f}" r="{5 if small else 9}" '
                       f'fill="none" stroke="{DOWN_COLOUR}" stroke-width="2"/>')
    return out
