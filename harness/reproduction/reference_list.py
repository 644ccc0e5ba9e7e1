"""``rosetta reproduce --list``: every reference and what of it runs here, each column from the registries."""

from __future__ import annotations

from harness.reproduction import reference
from harness.reproduction.emulated_reproduction import emulated_here
from harness.reproduction.published import published_here, reduced_here


def references_table():
    """``rosetta reproduce --list``: each reference and what of it runs here (from the registries), a rich table."""
    from harness.base.escaping import terminal as escape
    from rich.table import Table

    table = Table(title="Published references (results/reference/): what runs here follows from the registries")
    for col in ("id", "unit", "reduced run here", "--at published", "--at emulated"):
        table.add_column(col)
    for ref in reference.all_references().values():
        # escaped: a reason's "[published]" is the file's section, not rich's markup (which would drop it)
        table.add_row(*(escape(cell) for cell in (ref.id, ref.unit, reduced_here(ref), published_here(ref),
                                                  emulated_here(ref))))
    return table
