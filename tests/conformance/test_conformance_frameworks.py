"""One suite every framework in frameworks.REGISTRY passes (a new framework is picked up by itself): its
declaration (``INFO``, harness.contract.framework_api.FrameworkInfo) agrees with the registries and with
the code its worker reaches, all read without importing a deep-learning framework.

- the worker module is a module path under the framework's package, found without importing the
  framework, and defines ``main(spec, events)``;
- every launcher it names is in harness.launchers.REGISTRY, its Kubernetes job kind is one the
  kubernetes launcher knows, its Dockerfile builds its image (that no other Dockerfile builds it is
  tests/unit/tools/test_docker.py's);
- the per-strategy and per-workload tables name only strategies and workloads it declares;
- the strategies it declares are the ones the code its worker reaches names (its package and the shared code
  it imports), every workload it declares has a model builder for its family (the workload's declaration says
  which: tests/conformance/test_conformance_workloads.py checks the builders), and emulated accelerators are
  declared exactly where that code has them.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import frameworks
from harness import launchers
from harness.contract.axes import Device, Strategy
from harness.contract.workloads import DECLARATIONS
from harness.launchers.kubernetes import JobKind
from tests.helpers import REPO
from tests.unit.house.test_architecture import FRAMEWORK_MODULES

FRAMEWORKS = frameworks.names()


def module_path(name: str) -> Path | None:
    path = REPO.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def reached(start: str) -> dict[str, Path]:
    """The project's modules under frameworks/ that ``start`` imports, directly or not, at module level or
    inside a function (the code a rank may run), ``start`` included."""
    todo, seen = [start], {}
    while todo:
        name = todo.pop()
        path = module_path(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names if alias.name.startswith("frameworks.")]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("frameworks"):
                todo += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return seen


def named_members(enum: type, text: str) -> set:
    """The members of ``enum`` the source names (``Strategy.FSDP``)."""
    return {member for member in enum if re.search(rf"\b{enum.__name__}\.{member.name}\b", text)}


def reached_text(name: str) -> str:
    return "\n".join(path.read_text() for path in reached(frameworks.get(name).worker_module).values())


@pytest.mark.runs
@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_worker_is_a_module_of_its_package_found_without_importing_the_framework(name):
    info = frameworks.get(name)
    assert info.name == name and info.title
    assert info.worker_module.startswith(f"{frameworks.REGISTRY[name]}."), "the worker lives in its own package"
    code = (f"import importlib.util, sys; assert importlib.util.find_spec({info.worker_module!r}); "
            f"print(sorted(m for m in {sorted(FRAMEWORK_MODULES)!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"finding {info.worker_module} imported {done.stdout.strip()}"
    tree = ast.parse(module_path(info.worker_module).read_text())
    mains = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main"]
    assert mains and [a.arg for a in mains[0].args.args] == ["spec", "events"], "main(spec, events): the entry point"


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_its_launchers_job_kind_and_dockerfile_exist(name):
    info = frameworks.get(name)
    assert info.launchers and set(info.launchers) <= set(launchers.names()), info.launchers
    assert info.kubernetes_job in {kind.value for kind in JobKind} - {JobKind.AUTO.value}
    dockerfile = REPO / info.dockerfile
    assert dockerfile.parent == REPO / "docker" and dockerfile.exists(), info.dockerfile
    assert re.findall(r"ROSETTA_IMAGE=(\S+)", dockerfile.read_text()) == [info.image]


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_its_tables_name_only_what_it_declares(name):
    info = frameworks.get(name)
    assert info.workloads and info.strategies and info.storage and info.devices and info.precisions
    assert set(info.workload_requires) <= set(info.workloads)
    assert set(info.memory_formats) <= set(info.workloads)
    assert set(info.strategy_devices) <= set(info.strategies)
    assert all(set(devices) <= set(info.devices) for devices in info.strategy_devices.values())
    assert set(info.strategy_workloads) <= set(info.strategies)
    assert all(set(workloads) <= set(info.workloads) for workloads in info.strategy_workloads.values())
    assert all(module.isidentifier() for module in info.requires), info.requires


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_strategies_it_declares_are_those_its_worker_reaches_and_its_workloads_have_its_model(name):
    """A declared strategy the worker's code never names would fail in a user's run; one it names but
    the declaration leaves out would be skipped where it could run."""
    info, text = frameworks.get(name), reached_text(name)
    assert named_members(Strategy, text) == set(info.strategies)
    without = [w.value for w in info.workloads if info.family not in DECLARATIONS[w].builders]
    assert without == [], f"declared, but no {info.family or '(no family)'} model in their declarations"
    emulated = "emulated_device" in text or Device.EMULATED.name in text
    assert (Device.EMULATED in info.devices) == emulated, "emulated accelerators declared where the code has them"


def test_the_reach_follows_imports_inside_functions_too():
    """The pipeline's module is imported only by the runs that use it: the walk still finds it."""
    assert "frameworks.torch_ddp.strategies.pipeline_parallel" in reached("frameworks.torch_ddp.worker")
