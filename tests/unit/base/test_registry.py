"""One registry for the five plug-in kinds: an unknown name, from code, a scenario or the command line, is one
line of bad input (exit 2) that lists the valid names."""

from __future__ import annotations

import pytest

import frameworks
from harness import launchers
from harness.base.errors import UserError
from harness.base.registry import Registry, UnknownName
from harness.cli.main import main
from harness.contract.axes import STORAGE, STRATEGIES, Storage, Strategy, Workload
from harness.contract.workloads import DECLARATIONS, WORKLOADS
from harness.experiment import scenario
from harness.storage import backends
from tests.helpers.scenarios import tiny_scenario

KINDS = {
    "framework": (frameworks.FRAMEWORKS, frameworks.names()),
    "launcher": (launchers.LAUNCHERS, launchers.names()),
    "storage": (STORAGE, [s.value for s in Storage]),
    "strategy": (STRATEGIES, [s.value for s in Strategy]),
    "workload": (DECLARATIONS, [w.value for w in Workload]),
}


@pytest.mark.parametrize("kind", KINDS)
def test_an_unknown_name_lists_the_valid_ones(kind):
    registry, known = KINDS[kind]
    with pytest.raises(UnknownName) as caught:
        registry.get("bogus", where="here.toml")
    message = str(caught.value)
    assert message == f"here.toml: {kind} 'bogus': unknown; known: {', '.join(known)}"
    assert "\n" not in message and isinstance(caught.value, UserError) and isinstance(caught.value, KeyError)


@pytest.mark.parametrize("kind", KINDS)
def test_every_registered_name_has_its_declaration(kind):
    registry, known = KINDS[kind]
    assert registry.names() == known
    assert all(registry[name] is registry.get(name) for name in known)  # loaded once, then the same object


def test_declarations_load_only_when_asked():
    loaded = []
    registry = Registry("toy", {"a": lambda: loaded.append("a") or "A", "b": "harness.base.errors:UserError"})
    assert registry.names() == ["a", "b"] and loaded == []
    assert registry["a"] == "A" and registry["a"] == "A" and loaded == ["a"]
    assert registry["b"] is UserError


def test_a_closed_set_member_is_its_name():
    assert DECLARATIONS[Workload.BERT] is DECLARATIONS["bert"] is WORKLOADS[Workload.BERT]
    assert STRATEGIES[Strategy.FSDP] is Strategy.FSDP.kind


def test_a_name_added_later_is_registered(monkeypatch):
    monkeypatch.setitem(frameworks.REGISTRY, "late", "tests.helpers.faults")
    assert "late" in frameworks.names() and frameworks.get("late") is frameworks.get("late")


def test_the_old_entry_points_raise_it():
    for call in (lambda: frameworks.get("bogus"), lambda: launchers.module("bogus"),
                 lambda: backends.get("bogus")):
        with pytest.raises(UnknownName, match="'bogus': unknown; known: "):
            call()


@pytest.mark.parametrize("kind", KINDS)
def test_a_scenario_naming_an_unknown_one_says_the_valid_ones(kind, tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(tiny_scenario(matrix={kind: "bogus"}))
    with pytest.raises(UserError) as caught:
        scenario.load(path)
    message = str(caught.value)
    assert "\n" not in message and f"{path}: [matrix] {kind}" in message and "bogus" in message
    assert all(name in message for name in KINDS[kind][1])


@pytest.mark.parametrize("argv", [["equivalence", "--framework", "bogus"],
                                  ["reproduce", "batchai-torch-v100", "--at", "emulated", "--framework", "bogus",
                                   "--dry-run"],
                                  ["reproduce", "batchai-torch-v100", "--at", "published", "--launcher", "bogus",
                                   "--dry-run"]])
def test_the_command_line_naming_an_unknown_one_says_the_valid_ones(argv, capsys, tmp_path):
    assert main([*argv[:1], *argv[1:], *(["--results", str(tmp_path)] if argv[0] == "reproduce" else [])]) == 2
    err = capsys.readouterr().err.strip()
    kind = "framework" if "--framework" in argv else "launcher"
    assert err.count("\n") == 0 and "bogus" in err
    assert all(name in err for name in KINDS[kind][1])
