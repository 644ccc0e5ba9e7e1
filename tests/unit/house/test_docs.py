"""The README and docs/ stay true to the code: every page linked, every scenario file they quote plans,
every scenario snippet they show loads, every verb they name exists, the architecture page names every
module of harness/ in its wing's row, and its guide to adding a framework, launcher, storage backend,
strategy or workload names files and registries that exist and are the ones the code reads."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness.base.errors import UserError
from harness.cli.main import _parser, main
from harness.experiment import scenario
from tests.helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TEXT = {page: page.read_text() for page in PAGES}


def test_the_readme_is_short_and_links_every_page_of_docs():
    readme = TEXT[REPO / "README.md"]
    assert len(readme.splitlines()) <= 200
    for page in (REPO / "docs").glob("*.md"):
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"


def test_relative_links_point_at_files_that_exist():
    broken = [f"{page.name}: {target}" for page, text in TEXT.items()
              for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
              if not (page.parent / target).exists()]
    assert broken == []


@pytest.mark.parametrize("name", sorted({m for text in TEXT.values() for m in re.findall(r"scenarios/(\w+)\.toml", text)}))
def test_every_scenario_the_docs_quote_plans(name, capsys):
    path = REPO / "scenarios" / f"{name}.toml"
    if name == "comm":  # the settings of `rosetta comm`, not a scenario
        from harness.comm.settings import load_settings

        load_settings(path)
        return
    assert main(["plan", str(path)]) == 0, capsys.readouterr().err


def _snippets() -> list[tuple[str, str]]:
    return [(f"{page.name}#{i}", block) for page, text in TEXT.items()
            for i, block in enumerate(re.findall(r"```toml\n(.*?)```", text, re.S)) if "[matrix]" in block]


@pytest.mark.parametrize("where,block", _snippets())
def test_every_scenario_snippet_in_the_docs_loads(where, block, tmp_path):
    path = tmp_path / "snippet.toml"
    if "framework =" not in block:  # a fragment showing one axis: completed with the quickstart's first
        block = block.replace("[matrix]", '[matrix]\nframework = "torch_ddp"\nworkload = "resnet50"', 1)
    path.write_text(block)
    try:
        scenario.load(path)
    except UserError as exc:  # a snippet may name a server of the reader's: only its shape is checked here
        assert "url" in str(exc) or "endpoint" in str(exc), f"{where}: {exc}"


def test_every_verb_the_docs_name_exists():
    verbs = set(_parser()._subparsers._group_actions[0].choices)  # noqa: SLF001 - argparse keeps them there
    named = {v for text in TEXT.values() for v in re.findall(r"`rosetta (\w+)", text)}
    assert named and named <= verbs, named - verbs


ARCHITECTURE = TEXT[REPO / "docs" / "architecture.md"]


def test_the_architecture_page_names_every_module_of_the_harness_in_its_wings_row():
    rows = dict(re.findall(r"^\| `(\w+)/` \| (.*) \|$", ARCHITECTURE, re.M))
    missing = [f"harness/{wing.name}/{module.name}" for wing in sorted((REPO / "harness").iterdir())
               if wing.is_dir() and not wing.name.startswith("__")
               for module in sorted([*wing.glob("*.py"), *wing.glob("*.toml")]) if module.stem != "__init__"
               and f"`{module.stem if module.suffix == '.py' else module.name}`" not in rows.get(wing.name, "")]
    assert missing == []


def _guide_rows() -> dict[str, str]:
    section = ARCHITECTURE.split("## Adding a framework", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| a (framework|launcher|storage backend|strategy|workload) \| (.*) \|$", section, re.M))


def test_the_guide_to_adding_an_entry_names_files_that_exist():
    import frameworks
    from harness import launchers
    from harness.contract.workloads import DECLARATIONS

    rows = _guide_rows()
    assert sorted(rows) == ["framework", "launcher", "storage backend", "strategy", "workload"]
    names = {"framework": frameworks.names(), "launcher": launchers.names(), "workload": DECLARATIONS.names()}
    missing = [f"{kind}: {path.replace('<name>', name)}" for kind, row in rows.items()
               for path in re.findall(r"`((?:frameworks|harness|testbed|tests|docker)/[^`]*)`", row)
               for name in names.get(kind, ["-"]) if not _module_exists(REPO / path.replace("<name>", name))]
    assert missing == []


def _module_exists(path: Path) -> bool:
    """A file named in the guide, or for ``<name>.py`` the package ``<name>/`` a plug-in with helpers is."""
    return path.exists() or (path.suffix == ".py" and (path.with_suffix("") / "__init__.py").exists())


def test_the_registries_the_guide_names_are_the_ones_the_code_reads():
    """``NAME`` in ``path``: the file defines NAME, and the registries read it (not a copy of it)."""
    import frameworks
    from harness import launchers
    from harness.contract.axes import Storage, Strategy, Workload
    from harness.experiment import strategies
    from harness.contract import workloads
    from harness.storage import backends
    from testbed import storage_sites

    named = [pair for row in _guide_rows().values() for pair in re.findall(r"`(\w+)` in `([\w/.]+\.py)`", row)]
    assert len(named) >= 7, named
    for name, path in named:
        tree = ast.parse((REPO / path).read_text())
        defined = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                   for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
        defined |= {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        assert name in defined, f"{path} defines no {name}"
    assert frameworks.names() == list(frameworks.REGISTRY) and launchers.names() == list(launchers.REGISTRY)
    assert list(backends.REGISTRY) == [s.value for s in Storage if s.kind.client] == list(storage_sites.SITES)
    assert list(strategies.OPTIONS) == list(Strategy)
    assert workloads.DECLARATIONS.names() == list(workloads.REGISTRY) == [w.value for w in Workload]
    assert all(set(workloads.DECLARATIONS[name].builders) <= set(workloads.FAMILIES) for name in workloads.REGISTRY)
