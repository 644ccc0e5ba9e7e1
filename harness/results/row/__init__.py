"""The result row as typed sections: each section declares its columns (name, dtype, unit, description) and
names the function that fills them (``sections``); the table's column list, dtypes and schema version are
derived here from the sections and the fingerprints recorded per version (``versions.toml``).

Imports ``harness.base`` only (and the standard library).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from harness.results.row.section import Column, Section, col, fingerprint
from harness.results.row.sections import SECTIONS

VERSIONS_FILE = Path(__file__).with_name("versions.toml")


def columns_of(sections: tuple[Section, ...] = SECTIONS) -> tuple[Column, ...]:
    """Every column of the row, section after section."""
    return tuple(c for s in sections for c in s.columns)


def recorded_versions() -> dict[int, dict[str, str]]:
    """Schema version -> its recorded fingerprint and note (versions.toml)."""
    data = tomllib.loads(VERSIONS_FILE.read_text())
    return {int(v): entry for v, entry in data["version"].items()}


COLUMNS: dict[str, str] = {c.name: c.dtype for c in columns_of()}  # column -> pandas dtype, in file order
SCHEMA_VERSION: int = max(recorded_versions())
READABLE_VERSIONS: tuple[int, ...] = tuple(sorted(recorded_versions()))

__all__ = ["COLUMNS", "SCHEMA_VERSION", "READABLE_VERSIONS", "SECTIONS", "Column", "Section", "col", "fingerprint",
           "columns_of", "recorded_versions"]
