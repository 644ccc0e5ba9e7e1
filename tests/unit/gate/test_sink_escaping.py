"""Every sink escapes for its own language (issue 52): a results table is input from anyone's CI, so a
string in any of its string columns must reach the dashboard's pages as text (no tag, no event
attribute), the --markdown summaries of compare and history as one escaped cell (no tag, no link, no
image, no column break, no new line), JUnit XML as text, and the terminal tables with no escape
sequence or control character and no rich markup. Hypothesis picks the column and the string.

Before harness.base.escaping the Markdown summaries copied ``<img ...>`` and newlines raw and the
terminal tables passed ESC sequences through (these tests failed on them)."""

import io
import json
import random
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.base import escaping
from harness.gate import ci_reports, compare, dashboard, history, verdict_table
from harness.reports import aggregate, terminal
from harness.results import integrity, table as results
from tests.helpers.history_rows import sweep_rows
from tests.helpers.rows import result_row

# every string column of the schema but the JSON ones (checked as JSON at read) and the two whose values the
# verbs order and count by (a hostile timestamp or status is refused at read: test_table_validation)
COLUMNS = tuple(c for c, dtype in results.COLUMNS.items()
                if dtype == "string" and c not in (*integrity.JSON_COLUMNS, "status", "timestamp"))
PAYLOADS = ('<script>alert(1)</script>', '<img src=x onerror=alert(1)>', '"><svg onload=alert(1)>', "a|b",
            "line\nbreak", "[link=https://evil.example]click[/link]", "\x1b]8;;https://evil.example\x1b\\hi\x1b]8;;\x1b\\",
            "\x1b[2J\x1b[H", "\x9b31m", "![x](https://evil.example/p.png)", "`code` **b** _i_ ~~s~~",
            "https://evil.example", "&amp;&lt;", "\u2028x\u0085", "\x00\x07\x7f")
HOSTILE = st.one_of(st.sampled_from(PAYLOADS),
                    st.text(alphabet=st.sampled_from('<>&"\'|*_[]`!:\\\n\r\x1b\x9b\x07=/ab'), min_size=1, max_size=30)
                    .map(lambda s: "x" + s))


def _table(column: str, value: str) -> pd.DataFrame:
    rng = random.Random(1)
    rows = []
    for i in range(6):
        for config in ("cfg-a", "cfg-b"):
            for r in sweep_rows(i, 0.080 if i < 4 else 0.095, rng, config=config):
                if config == "cfg-b" or column in ("sweep_id", "framework_version"):
                    r[column] = value + (str(i) if column == "sweep_id" else "")
                rows.append({**result_row(), **r})  # every column the report's summary reads
    return results.to_frame(rows)  # every column of the schema, as a read table has


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.events = set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.events += [name for name, _ in attrs if name.startswith("on")]


def _parsed(text: str) -> _Tags:
    parser = _Tags()
    parser.feed(text)
    return parser


def _pages(table: pd.DataFrame, out) -> dict[str, str]:
    dashboard.write(history.series(table), table, out, "title")
    return {p.name: p.read_text() for p in out.glob("*.html")}


def _unescaped(markdown: str) -> str:
    """The Markdown with its backslash escapes taken out: what is left is what GitHub reads as syntax."""
    return re.sub(r"\\.", "", markdown)


def _check_markdown(text: str, clean: str) -> None:
    assert len(text.splitlines()) == len(clean.splitlines()), text  # no row broken over lines
    syntax = _unescaped(text)
    assert "<" not in syntax and "[" not in syntax and "`" not in syntax and "!" not in syntax, text
    header = next(h for h in clean.splitlines() if h.startswith("|"))
    for line in text.splitlines():
        if line.startswith("|"):
            assert _unescaped(line).count("|") == header.count("|"), line  # no column break


def _check_terminal(render) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=4000, force_terminal=False, color_system=None)
    render(console)
    text = console.file.getvalue()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028]", text.replace("\x1b", "\x01")), repr(text)
    return text


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The sinks' output on a benign table: the tags and the line counts a hostile one must not exceed."""
    table = _table("host", "m1")
    pages = _pages(table, tmp_path_factory.mktemp("site"))
    cells = compare.compare_tables(table[table["sweep_id"] < "s03"], table[table["sweep_id"] >= "s03"])
    # and the list a page gives a provenance change (a value differing between sweeps in a machine column)
    return {"tags": set().union(*(_parsed(p).tags for p in pages.values())) | {"ul", "li"},
            "history": ci_reports.history_markdown(history.series(table), "title"),
            "compare": ci_reports.markdown(cells, "title")}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(COLUMNS), value=HOSTILE)
def test_no_sink_lets_a_string_become_markup(clean, tmp_path_factory, column, value):
    table = _table(column, value)
    for name, page in _pages(table, tmp_path_factory.mktemp("site")).items():
        parsed = _parsed(page)
        assert parsed.tags <= clean["tags"] and not parsed.events, (name, parsed.tags - clean["tags"], parsed.events)
        assert page.count("<script") == 1, name  # only dashboard.js
    # the Markdown of the same table with a plain word there: the lines and columns the hostile one must keep
    # (a value in some columns adds a line of its own: a provenance change, where a slowest host is named)
    twin = _table(column, "plain" if column != "sweep_id" else "s")
    all_series = history.series(table)
    _check_markdown(ci_reports.history_markdown(all_series, value), ci_reports.history_markdown(history.series(twin),
                                                                                                  "title"))
    cut = table["sweep_id"].iloc[18]
    base, cur = table[table["sweep_id"] < cut], table[table["sweep_id"] >= cut]
    cells = compare.compare_tables(base, cur)
    twin_cut = twin["sweep_id"].iloc[18]
    twin_cells = compare.compare_tables(twin[twin["sweep_id"] < twin_cut], twin[twin["sweep_id"] >= twin_cut])
    _check_markdown(ci_reports.markdown(cells, value), ci_reports.markdown(twin_cells, "title"))
    ET.fromstring(ci_reports.junit_xml(cells, value))  # well-formed, whatever the strings
    ET.fromstring(ci_reports.history_junit(all_series, value))
    _check_terminal(lambda c: verdict_table.print_comparison(cells, c, title=value))
    _check_terminal(lambda c: verdict_table.print_history(all_series, c))
    summary = aggregate.summarize(table)
    _check_terminal(lambda c: [c.print(item) for item in terminal.summary_items(summary)])


def test_rich_markup_in_the_data_is_shown_as_text():
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(escaping.terminal("[link=https://evil.example]hi[/link] \x1b[2J"))
    assert console.file.getvalue().startswith("[link=https://evil.example]hi[/link]")


@pytest.mark.parametrize("value, want", [
    ("<img src=x>", "&lt;img src=x&gt;"), ("a|b", "a\\|b"), ("a\nb", "a b"), ("[x](y)", "\\[x\\](y)"),
    ("https://e.x", "https\\://e.x"), ("\x1b[2Jz", "\ufffdz")])
def test_markdown_cell(value, want):
    assert escaping.markdown_cell(value) == want


@pytest.mark.parametrize("value", ["\x1b[2J", "\x1b]8;;https://e.x\x07", "\x9b2J", "\x1bc", "\x1b]0;title\x1b\\"])
def test_terminal_sequences_are_removed_whole(value):
    out = escaping.controls("a" + value + "b")
    assert out == "a\ufffdb", repr(out)


@pytest.mark.parametrize("name", ["\x1b]8;;https://evil.example\x1b\\hi\x1b]8;;\x1b\\", "\x1b[2J\x1b[H", "\x9b31mred",
                                  "[link=https://evil.example]click[/link]"])
def test_a_scenario_name_reaches_the_terminal_as_text(name, tmp_path, capsys):
    """A scenario's name heads the plan's and the dry run's tables: no sequence of it reaches the terminal."""
    from harness.cli import main as cli

    path = tmp_path / "s.toml"
    path.write_text(f'name = {json.dumps(name)}\n[matrix]\nframework = "torch_ddp"\nworkload = "resnet50"\nsize = "tiny"\n')
    for argv in (["plan", str(path)], ["run", str(path), "--dry-run", "--results", str(tmp_path / "r")]):
        assert cli.main(argv) == 0, argv
        out = capsys.readouterr().out
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out), argv
        assert "[link=" not in name or "[/link]" in out, argv  # rich's markup shown as text, not made a link
