"""``rosetta compare``'s and ``rosetta history``'s verdicts for CI systems and people: JUnit XML (what
gates read: one test case per configuration, or per series for history; a regression or a failed run as a
failure with its change, interval and reason), a Markdown summary (a GitHub step summary, a merge-request
comment) and the verdicts as JSON."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from harness.base.escaping import markdown_cell, xml_text
from harness.gate.compare import GATE_FAILING, INCONCLUSIVE, MISSING, NEW, NOT_JUDGED, SKIPPED, Cell, gate_failed

VERDICTS_FORMAT = 2  # of the JSON document; bump when a field changes meaning (2: alpha, inconclusive, not judged, skipped)
FAILING = GATE_FAILING  # a JUnit failure
NOT_COMPARED = (MISSING, NEW, INCONCLUSIVE, NOT_JUDGED, SKIPPED)  # a JUnit skip: no verdict, and why


def _finite(value: Any) -> Any:
    """JSON has no NaN or Infinity: null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def describe(cell: Cell) -> str:
    """The verdict in one line: change, interval, noise and p, or why there is none."""
    if math.isnan(cell.change):
        return f"{cell.verdict}" + (f": {cell.note}" if cell.note else "")
    return (f"{cell.verdict}: {cell.change:+.1%} {cell.unit}/s ({cell.baseline_rate:.1f} -> {cell.current_rate:.1f}; "
            f"95% CI {cell.ci_low:+.1%} .. {cell.ci_high:+.1%}; noise ±{cell.threshold:.1%}; "
            f"p {cell.p_value:.2g}; repeats {cell.baseline_repeats}/{cell.current_repeats})"
            + (f"; {cell.note}" if cell.note else "") + (f"; where: {cell.where}" if cell.where else ""))


def verdicts(cells: Sequence[Cell], title: str) -> dict[str, Any]:
    """The comparison as a JSON-ready document (NaN as null; changes are fractions of throughput)."""
    return {"format": VERDICTS_FORMAT, "title": title, "gate_failed": gate_failed(cells),
            "alpha": cells[0].alpha if cells else None,
            "configurations": [{k: _finite(v) for k, v in {**asdict(c), "provenance": list(c.provenance),
                                                            "summary": describe(c)}.items()} for c in cells]}


def junit_xml(cells: Sequence[Cell], title: str) -> str:
    """JUnit XML: one testsuite, one testcase per configuration (classname: framework and workload)."""
    failures = sum(c.verdict in FAILING for c in cells)
    skipped = sum(c.verdict in NOT_COMPARED for c in cells)
    suites = ET.Element("testsuites", name="rosetta compare", tests=str(len(cells)), failures=str(failures))
    suite = ET.SubElement(suites, "testsuite", name=xml_text(title), tests=str(len(cells)), failures=str(failures),
                          errors="0", skipped=str(skipped))
    for cell in cells:
        case = ET.SubElement(suite, "testcase", classname=xml_text("rosetta." + ".".join(cell.label.split()[:2])),
                             name=xml_text(cell.label))
        text = xml_text(describe(cell) + "".join(f"\nprovenance differs: {p}" for p in cell.provenance))
        if cell.verdict in FAILING:
            ET.SubElement(case, "failure", message=xml_text(describe(cell)), type=cell.verdict).text = text
        elif cell.verdict in NOT_COMPARED:
            ET.SubElement(case, "skipped", message=xml_text(describe(cell)))
        else:
            ET.SubElement(case, "system-out").text = text
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def markdown(cells: Sequence[Cell], title: str) -> str:
    """A Markdown table of the verdicts, failing ones first, then the provenance differences."""
    head = "**gate failed**" if gate_failed(cells) else "gate passed"
    failing = sum(c.verdict in FAILING for c in cells)
    unjudged = sum(c.verdict in (INCONCLUSIVE, NOT_JUDGED) for c in cells)
    also = f" {unjudged} inconclusive or not judged (see their notes)." if unjudged else ""
    lines = [f"### {markdown_cell(title)}", "",
             f"{head}: {failing} of {len(cells)} configurations regressed or failed.{also}", "",
             "| configuration | verdict | change | 95% CI | noise | baseline | current | note |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for c in sorted(cells, key=lambda c: c.verdict not in FAILING):
        measured = not math.isnan(c.change)
        cols = [markdown_cell(c.label), f"**{c.verdict}**" if c.verdict in FAILING else c.verdict,
                f"{c.change:+.1%}" if measured else "-",
                f"{c.ci_low:+.1%} .. {c.ci_high:+.1%}" if measured else "-",
                f"±{c.threshold:.1%}" if measured else "-",
                f"{c.baseline_rate:.1f}" if measured else "-", f"{c.current_rate:.1f}" if measured else "-",
                markdown_cell(c.note or "")]
        lines.append("| " + " | ".join(cols) + " |")
    provenance = [f"- {markdown_cell(c.label)}: {markdown_cell(p)}" for c in cells for p in c.provenance]
    if provenance:
        lines += ["", "Provenance differs:", ""] + provenance
    where = [f"- {markdown_cell(c.label)}: {markdown_cell(c.where)}" for c in cells if c.where]
    if where:
        lines += ["", "Where it moved (per-rank data):", ""] + where
    return "\n".join(lines) + "\n"


def write(cells: Sequence[Cell], title: str, junit: Path | None = None, markdown_path: Path | None = None,
          json_path: Path | None = None) -> list[Path]:
    """Write each requested file; return the paths written."""
    return _write(((junit, lambda: junit_xml(cells, title)), (markdown_path, lambda: markdown(cells, title)),
                   (json_path, lambda: json.dumps(verdicts(cells, title), indent=2, allow_nan=False) + "\n")))


# ---------------------------------------------------------------- rosetta history's gate

HISTORY_FORMAT = 2  # of the history JSON document; bump when a field changes meaning (2: the verdict's change is
# the newest sweep's, with the step it belongs to; only a confirmed step fails; mde, canary, withdrawn)


def _clean(value: Any) -> Any:
    """JSON-ready: NaN and infinities as null, tuples as lists, dataclasses as objects."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def describe_series(s) -> str:
    """The newest sweep's verdict in one line: its change and p, the step it belongs to, the power."""
    v = s.verdict
    head = f"{v.verdict}" + (f" ({v.status})" if v.status else "")
    change = (f": {v.change:+.1%} {s.unit}/s at sweep {v.sweep_id} (p {v.p_value:.2g}; noise ±{s.noise:.1%} per "
              f"sweep)") if not math.isnan(v.change) else ""
    step = (f"; the step at {v.step}: {v.step_change:+.1%} (p {v.step_p:.2g})"
            if v.step and not math.isnan(v.step_change) and v.status else "")
    power = f"; smallest step it detects {-s.mde:+.1%}" if not math.isnan(s.mde) else ""
    return f"{head}{change}{step}" + (f"; {v.note}" if v.note else "") + power + f" [sweep {v.sweep_id}]"


def history_verdicts(all_series: Sequence, title: str) -> dict[str, Any]:
    """Every series with its points, levels, steps, outliers and verdict (NaN as null)."""
    from harness.gate.history import gate_failed as history_gate_failed

    return {"format": HISTORY_FORMAT, "title": title, "gate_failed": history_gate_failed(all_series),
            "series": [_clean({**asdict(s), "summary": describe_series(s),
                               "canary_state": s.canary.state if s.canary else None}) for s in all_series]}


def history_junit(all_series: Sequence, title: str) -> str:
    """JUnit XML: a test case per series (configuration on a machine); its newest sweep's regression fails."""
    failures = sum(s.verdict.fails for s in all_series)
    skipped = sum(s.verdict.verdict == "not judged" for s in all_series)
    suites = ET.Element("testsuites", name="rosetta history", tests=str(len(all_series)), failures=str(failures))
    suite = ET.SubElement(suites, "testsuite", name=xml_text(title), tests=str(len(all_series)), failures=str(failures),
                          errors="0", skipped=str(skipped))
    for s in all_series:
        case = ET.SubElement(suite, "testcase", classname=xml_text("rosetta." + ".".join(s.label.split()[:2])),
                             name=xml_text(f"{s.label} on {s.machine}"))
        steps = "".join(f"\nstep {st.direction} {st.change:+.1%} at {st.sweep_id} ({st.verdict})"
                        + "".join(f"; {p}" for p in st.causes) for st in s.steps)
        text = xml_text(describe_series(s) + steps)
        if s.verdict.fails:
            ET.SubElement(case, "failure", message=xml_text(describe_series(s)), type="regression").text = text
        elif s.verdict.verdict == "not judged":
            ET.SubElement(case, "skipped", message=xml_text(describe_series(s)))
        else:
            ET.SubElement(case, "system-out").text = text
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def history_markdown(all_series: Sequence, title: str) -> str:
    """A Markdown table of every series' newest verdict, regressions first, then each series' steps."""
    failing = [s for s in all_series if s.verdict.fails]
    head = "**gate failed**" if failing else "gate passed"
    lines = [f"### {markdown_cell(title)}", "", f"{head}: {len(failing)} of {len(all_series)} series confirmed a step "
             "down on their newest sweep.", "",
             "| configuration | machine | newest sweep | verdict | change | steps | trend | outliers | min. detectable |", "|---|---|---|---|---:|---|---|---:|---:|"]
    for s in sorted(all_series, key=lambda s: not s.verdict.fails):
        v = s.verdict
        verdict = v.verdict + (f" ({v.status})" if v.status else "")
        steps = ", ".join(f"{st.direction} {st.change:+.1%} at {markdown_cell(st.sweep_id)}" for st in s.steps) or "-"
        trend = ", ".join(f"{t.slope:+.2%}/sweep" for t in s.trends) or "-"
        cols = [markdown_cell(s.label), markdown_cell(s.machine), markdown_cell(v.sweep_id),
                f"**{verdict}**" if v.fails else verdict,
                f"{v.change:+.1%}" if not math.isnan(v.change) else "-", steps, trend, str(len(s.outliers)),
                f"{-s.mde:+.1%}" if not math.isnan(s.mde) else "-"]
        lines.append("| " + " | ".join(cols) + " |")
    causes = [f"- {markdown_cell(f'{s.label} on {s.machine}, {st.sweep_id}')}: {markdown_cell(p)}"
              for s in all_series for st in s.steps for p in st.causes]
    if causes:
        lines += ["", "Provenance changed at a step, and where it moved:", ""] + causes
    return "\n".join(lines) + "\n"


def write_history(all_series: Sequence, title: str, junit: Path | None = None, markdown_path: Path | None = None,
                  json_path: Path | None = None) -> list[Path]:
    """Write each requested file of history's verdicts; return the paths written."""
    return _write(((junit, lambda: history_junit(all_series, title)),
                   (markdown_path, lambda: history_markdown(all_series, title)),
                   (json_path, lambda: json.dumps(history_verdicts(all_series, title), indent=2,
                                                  allow_nan=False) + "\n")))


def _write(outputs) -> list[Path]:
    written = []
    for path, text in outputs:
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text())
            written.append(Path(path))
    return written
