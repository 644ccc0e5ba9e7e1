"""``rosetta list`` names what an emulated cluster can be made of: every accelerator profile and every link
preset of harness/machines, each with its source, read from the files (a new entry shows without a code change)."""

from __future__ import annotations

import io

from rich.console import Console

from harness.machines import accelerators, interconnects
from harness.reports import catalog


def rendered(table) -> str:
    out = io.StringIO()
    Console(file=out, width=400).print(table)
    return out.getvalue()


def test_every_accelerator_profile_is_listed_with_its_source():
    text = rendered(catalog.accelerators_table())
    profiles = accelerators.load_profiles()[0]
    assert catalog.accelerators_table().row_count == len(profiles)
    for p in profiles:
        assert p.accelerator in text and p.source[:60] in text


def test_every_link_preset_is_listed_with_title_and_source():
    text = rendered(catalog.links_table())
    links = interconnects.load_presets().links
    assert catalog.links_table().row_count == len(links)
    for name, link in links.items():
        assert name in text and link.title[:50] in text and link.source[:50] in text


def test_the_catalog_ends_with_both_tables():
    titles = [item.title for item in catalog.catalog_items() if not isinstance(item, str)]
    assert any("accelerators.toml" in t for t in titles) and any("interconnects.toml" in t for t in titles)
