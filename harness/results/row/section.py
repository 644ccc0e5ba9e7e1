"""A section of the result row: a frozen declaration of its columns and the function that fills them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Column:
    """One column of the row: its name, pandas dtype, unit ("" where it has none) and what it holds."""

    name: str
    dtype: str  # a pandas extension dtype: Int64 | Float64 | string | boolean
    unit: str
    description: str


@dataclass(frozen=True)
class Section:
    """Columns that one part of the harness fills, in the order they stand in files.

    ``filled_by`` names the function that fills them (``module:function``); the row's sections sit in
    the results wing, below the running wing that fills most of them, so it is a name, not an import
    (tests/unit/results/test_row_sections.py resolves every one).
    """

    name: str
    description: str
    filled_by: str
    columns: tuple[Column, ...]


def col(name: str, dtype: str, unit: str, description: str) -> Column:
    return Column(name, dtype, unit, description)


def fingerprint(columns: Iterable[Column]) -> str:
    """A short hash of the (name, dtype) list, in order: what a schema version stands for."""
    text = "\n".join(f"{c.name}:{c.dtype}" for c in columns)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
