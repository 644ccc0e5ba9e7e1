"""The row's typed sections: the table's columns derive from them, a change to them is a new schema version,
every section names a fill function that exists, and docs/row.md is generated from them."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from harness.results import row, table
from harness.results.row import doc

DTYPES = {"Int64", "Float64", "string", "boolean"}


def test_the_table_columns_are_the_sections_columns_in_order():
    names = [c.name for s in row.SECTIONS for c in s.columns]
    assert list(table.COLUMNS) == names and len(set(names)) == len(names)
    assert table.COLUMNS is row.COLUMNS and table.SCHEMA_VERSION == row.SCHEMA_VERSION
    assert {c.dtype for c in row.columns_of()} <= DTYPES


def test_the_newest_version_records_the_sections_fingerprint():
    recorded = row.recorded_versions()
    now = row.fingerprint(row.columns_of())
    assert recorded[row.SCHEMA_VERSION]["fingerprint"] == now, (
        f"the row's sections changed: record [version.{row.SCHEMA_VERSION + 1}] with fingerprint = \"{now}\" "
        f"in {row.VERSIONS_FILE}")
    kept = [v["fingerprint"] for v in recorded.values() if v["fingerprint"]]
    assert len(kept) == len(set(kept)), "two schema versions record the same columns"
    assert sorted(recorded) == list(range(1, row.SCHEMA_VERSION + 1)) == list(table.READABLE_VERSIONS)


@pytest.mark.parametrize("change", ["add", "retype", "move"])
def test_a_section_change_changes_the_fingerprint(change):
    sections = list(row.SECTIONS)
    last = sections[-1]
    if change == "add":
        sections.append(row.Section("per_rank", "a new section", "m:f", (row.col("rank_x", "Float64", "s", "x"),)))
    elif change == "retype":
        first = dataclasses.replace(last.columns[0], dtype="Float64")
        sections[-1] = dataclasses.replace(last, columns=(first, *last.columns[1:]))
    else:
        sections[-1] = dataclasses.replace(last, columns=last.columns[::-1])
    assert row.fingerprint(row.columns_of(tuple(sections))) != row.fingerprint(row.columns_of())


@pytest.mark.parametrize("section", row.SECTIONS, ids=lambda s: s.name)
def test_every_section_names_a_fill_function_that_exists(section):
    module, _, function = section.filled_by.partition(":")
    assert callable(getattr(importlib.import_module(module), function)), section.filled_by
    assert section.columns and section.description


def test_the_docs_page_is_the_sections():
    assert doc.block_of(doc.PAGE.read_text()) == doc.markdown(), (
        "docs/row.md differs from the row's sections: run `python -m harness.results.row.doc`")
