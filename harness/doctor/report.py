"""What a check says: a terminal table (findings first, then every probe), its JSON document (versioned),
JUnit XML (a test case per measurement, a bad one a failure with its evidence) and a Markdown summary."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from typing import Any

from harness.base.escaping import markdown_cell, terminal, xml_text
from harness.doctor.check import Report, blame
from harness.doctor.judge import UNITS, Verdict

REPORT_FORMAT = 1  # of the JSON document; bump when a field changes meaning


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def headline(report: Report) -> str:
    """One line: healthy, or the worst finding named with its evidence."""
    found = report.findings
    if report.failures and not found:
        return f"probes failed: {report.failures[0]}"
    if not found:
        return f"healthy: {len(report.verdicts)} measurements over {len(report.hosts)} hosts (against: {report.references()})"
    worst = found[0]
    return f"{blame(worst)} is slow: {worst.evidence()}"


def bisection_lines(report: Report) -> list[str]:
    b = report.bisection
    if b is None:
        return []
    lines = [f"halves {'+'.join(s.halves[0])} {s.figures[0]:.4g} GB/s | {'+'.join(s.halves[1])} "
             f"{s.figures[1]:.4g} GB/s -> " + ("neither slower" if s.slower is None else f"{'+'.join(s.halves[s.slower])}")
             for s in b.steps]
    what = "between the halves" if b.between_halves else "within"
    return lines + [f"bisection: the slow part lies {what} {'+'.join(b.suspects)}"]


def as_json(report: Report) -> dict[str, Any]:
    def verdict(v: Verdict) -> dict[str, Any]:
        m = v.measurement
        return {"probe": m.probe.value, "subject": m.subject, "value": _finite(m.value), "unit": UNITS[m.probe],
                "detail": m.detail, "reference": v.reference.value, "expected": _finite(v.expected),
                "slowdown": _finite(v.slowdown), "tolerance": v.tolerance, "bad": v.bad, "evidence": v.evidence()}

    b = report.bisection
    return {"format": REPORT_FORMAT, "check_id": report.check_id, "machine_type": report.machine_type,
            "hosts": list(report.hosts), "dilation": report.dilation, "exit_status": report.exit_status,
            "headline": headline(report), "references": report.references(),
            "findings": [{"names": blame(v), **verdict(v)} for v in report.findings],
            "failures": list(report.failures), "measurements": [verdict(v) for v in report.verdicts],
            "bisection": None if b is None else {
                "steps": [{"halves": [list(h) for h in s.halves], "busbw_GBps": list(s.figures),
                           "slower": s.slower} for s in b.steps],
                "suspects": list(b.suspects), "between_halves": b.between_halves},
            "notes": list(report.notes)}


def json_text(report: Report) -> str:
    return json.dumps(as_json(report), indent=2) + "\n"


def junit_xml(report: Report) -> str:
    bad = sum(v.bad for v in report.verdicts) + len(report.failures)
    total = len(report.verdicts) + len(report.failures)
    suites = ET.Element("testsuites", name="rosetta doctor", tests=str(total), failures=str(bad))
    suite = ET.SubElement(suites, "testsuite", name=xml_text(f"{report.check_id} {report.machine_type}"),
                          tests=str(total), failures=str(bad), errors="0", skipped="0")
    for v in report.verdicts:
        m = v.measurement
        case = ET.SubElement(suite, "testcase", classname=f"rosetta.doctor.{m.probe.value}", name=xml_text(m.subject))
        if v.bad:
            ET.SubElement(case, "failure", message=xml_text(f"{blame(v)} is slow"), type="slow").text = \
                xml_text(v.evidence())
        else:
            ET.SubElement(case, "system-out").text = xml_text(v.evidence())
    for failure in report.failures:
        case = ET.SubElement(suite, "testcase", classname="rosetta.doctor.launch", name=xml_text(failure.split(":")[0]))
        ET.SubElement(case, "failure", message=xml_text(failure), type="failed")
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def markdown(report: Report) -> str:
    lines = [f"### rosetta doctor: {markdown_cell(report.machine_type)}", "",
             f"{'**' + markdown_cell(headline(report)) + '**' if report.exit_status else markdown_cell(headline(report))}",
             "", "| probe | subject | figure | expected | reference | slowdown | verdict |",
             "|---|---|---:|---:|---|---:|---|"]
    for v in sorted(report.verdicts, key=lambda v: not v.bad):
        m = v.measurement
        lines.append(f"| {m.probe.value} | {markdown_cell(m.subject)} | {m.value:.4g} {UNITS[m.probe]} | "
                     + (f"{v.expected:.4g} | {v.reference.value} | {v.slowdown:.2f}x" if v.expected is not None
                        else "- | none | -") + f" | {'**bad**' if v.bad else 'ok'} |")
    lines += [f"- failed: {markdown_cell(f)}" for f in report.failures]
    lines += [f"- {markdown_cell(line)}" for line in bisection_lines(report) + list(report.notes)]
    return "\n".join(lines) + "\n"


def print_report(report: Report, console) -> None:
    from rich.table import Table

    out = Table(title=f"rosetta doctor: {terminal(report.machine_type)} ({len(report.hosts)} hosts"
                      + (f", figures undilated by k = {report.dilation:g}" if report.dilation != 1 else "") + ")")
    for col in ("probe", "subject", "figure", "expected", "reference", "slowdown", "verdict", "how"):
        out.add_column(col, justify="right" if col in ("figure", "expected", "slowdown") else "left")
    for v in sorted(report.verdicts, key=lambda v: not v.bad):
        m = v.measurement
        out.add_row(m.probe.value, terminal(m.subject), f"{m.value:.4g} {UNITS[m.probe]}",
                    "-" if v.expected is None else f"{v.expected:.4g}", v.reference.value,
                    "-" if v.slowdown is None else f"{v.slowdown:.2f}x", "[red]bad[/red]" if v.bad else "ok",
                    terminal(m.detail))
    console.print(out)
    for line in [*(f"failed: {f}" for f in report.failures), *bisection_lines(report), *report.notes]:
        console.print(terminal(line), highlight=False)
    console.print(("[red]" if report.exit_status else "[green]") + terminal(headline(report))
                  + ("[/red]" if report.exit_status else "[/green]"), highlight=False)
