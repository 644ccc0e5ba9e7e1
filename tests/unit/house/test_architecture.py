"""The house's rules, checked on the source: wings import one way, no import circles anywhere in the project's
code (imports inside functions included), no deep-learning framework imported at module level by the harness,
frameworks/ drawn as harness/ is (a worker is an entry point that nothing imports, a framework reaches another
only through frameworks/shared/, which reaches none), the frameworks' code reaches only the contract, the
storage readers and the ground floor of the harness, and modules and functions stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import REPO

HARNESS = REPO / "harness"
FRAMEWORKS = REPO / "frameworks"
# the project's code (tests/ is not: a test may stand in for a worker, tests/helpers/faults/worker.py wraps one)
PROJECT = ["harness", "frameworks", "testbed", "tools", "benchmarks"]

# Bottom to top: a wing may import the wings before it, never one after it (harness/<wing>/__init__.py).
WINGS = ["base", "contract", "machines", "storage", "launchers", "experiment", "results", "running", "reports",
         "export", "comm", "scaling", "reproduction", "doctor", "gate", "cli"]
FRAMEWORK_MODULES = {"torch", "tensorflow", "keras", "chainer", "chainermn", "horovod", "mpi4py", "jax", "cupy",
                     "transformers", "tf_keras"}
WORKER_MAY_IMPORT = {"base", "contract", "machines", "storage"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def harness_modules() -> dict[str, Path]:
    return {module_name(p): p for p in HARNESS.rglob("*.py")}


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for root in PROJECT for p in (REPO / root).rglob("*.py")}


def framework_modules() -> dict[str, Path]:
    return {module_name(p): p for p in FRAMEWORKS.rglob("*.py")}


def imports(path: Path, known: set[str]) -> list[tuple[str, bool, int]]:
    """(imported module, at module level?, line) for every import in ``path``; ``from a import b`` names
    the module ``a.b`` where that is a module, else ``a``."""
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top_level, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.append((full if full in known else node.module, id(node) in top_level, node.lineno))
    return found


def graph(modules: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in it, functions included); a package's own
    ``__init__`` is not counted as imported by the modules inside it."""
    modules = harness_modules() if modules is None else modules
    known = set(modules)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, _, _ in imports(path, known):
            while target and target not in known and "." in target:  # harness.x.Name -> harness.x
                target = target.rsplit(".", 1)[0]
            if target in known and target != name and not name.startswith(target + "."):
                edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def wing(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WINGS else None


def test_no_import_circle_in_the_harness_not_even_through_a_function():
    assert cycles(graph()) == []


def test_no_import_circle_anywhere_in_the_project_not_even_through_a_function():
    """harness, frameworks, testbed, tools and benchmarks together (a circle may run through two of them)."""
    assert cycles(graph(project_modules())) == []


def test_the_cycle_finder_finds_a_planted_circle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]


def test_wings_import_only_the_wings_below_them():
    wrong = []
    for source, targets in graph().items():
        for target in targets:
            a, b = wing(source), wing(target)
            if a and b and a != b and WINGS.index(b) > WINGS.index(a):
                wrong.append(f"{source} imports {target} ({a} is below {b})")
    assert wrong == []


def test_every_wing_is_a_package_whose_docstring_says_what_it_holds():
    top = sorted(p.name for p in HARNESS.iterdir() if not p.name.startswith((".", "__pycache__")))
    assert sorted(top) == sorted([*WINGS, "__init__.py"]), "harness/ holds the wings and nothing else"
    for name in WINGS:
        doc = ast.get_docstring(ast.parse((HARNESS / name / "__init__.py").read_text()))
        assert doc and len(doc.split()) >= 15, f"harness/{name}/__init__.py: say what lives there"


@pytest.mark.parametrize("root", ["harness", "frameworks"])
def test_no_deep_learning_framework_is_imported_at_module_level_by_the_harness(root):
    """Frameworks' declarations (frameworks/<name>/__init__.py) are read by the harness too."""
    paths = HARNESS.rglob("*.py") if root == "harness" else (REPO / "frameworks").glob("*/__init__.py")
    found = [f"{p.relative_to(REPO)}:{line} imports {name}" for p in paths
             for name, top, line in imports(p, set()) if top and name.split(".")[0] in FRAMEWORK_MODULES]
    assert found == []


def test_framework_workers_reach_only_the_contract_the_storage_readers_and_the_ground_floor():
    """Every module of frameworks/, worker or library, shared or not: what runs in a rank."""
    known = set(harness_modules())
    wrong = [f"{p.relative_to(REPO)}:{line} imports {name}" for p in FRAMEWORKS.rglob("*.py")
             for name, _, line in imports(p, known)
             if name.startswith("harness.") and wing(name) not in WORKER_MAY_IMPORT]
    assert wrong == []


# frameworks/: the registry (__init__.py), the shared code and one package per framework, nothing else
SHARED = "shared"


def framework_package(module: str) -> str | None:
    """``frameworks.<package>.…`` -> the package (a framework's, or ``shared``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "frameworks" else None


def is_worker(module: str) -> bool:
    """An entry point: frameworks/<framework>/worker.py, or a sub-package's worker.py (the collective
    benchmark's)."""
    return module.startswith("frameworks.") and module.endswith(".worker")


def test_frameworks_holds_the_registry_the_shared_code_and_one_package_per_registered_framework():
    from frameworks import REGISTRY

    found = sorted(p.name for p in FRAMEWORKS.iterdir() if not p.name.startswith((".", "__pycache__")))
    assert found == sorted(["__init__.py", SHARED, *REGISTRY]), "frameworks/: the registry, shared/, one package each"
    assert REGISTRY == {name: f"frameworks.{name}" for name in REGISTRY}
    for name in REGISTRY:  # what the harness runs: python -m harness.contract.worker <worker>; <package>.probe
        assert (FRAMEWORKS / name / "worker.py").exists() and (FRAMEWORKS / name / "probe.py").exists(), name


def test_every_frameworks_package_has_a_docstring_that_says_what_lives_there():
    for init in FRAMEWORKS.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 15, f"{init.relative_to(REPO)}: say what lives there"


def test_no_module_imports_a_worker_a_worker_is_an_entry_point_only():
    """frameworks/*/worker.py is started by harness.contract.worker (named by string in the framework's
    declaration); what another module needs from it belongs in a library module."""
    modules = project_modules()
    wrong = [f"{source} imports {target}" for source, targets in graph(modules).items() for target in targets
             if is_worker(target)]
    assert wrong == []


def test_a_framework_reaches_another_only_through_the_shared_package_which_reaches_none():
    modules = framework_modules()
    wrong = []
    for source, targets in graph(modules).items():
        mine = framework_package(source)
        for target in targets:
            theirs = framework_package(target)
            if mine is None:  # the registry: names its packages by string, imports none
                wrong += [f"{source} imports {target}"] if theirs else []
            elif theirs and theirs != mine and (mine == SHARED or theirs != SHARED):
                wrong.append(f"{source} imports {target} ({mine} -> {theirs})")
    assert wrong == []


def test_the_architecture_checks_find_planted_faults():
    """The rules above, on a planted graph: a worker imported, a framework reaching into another."""
    assert is_worker("frameworks.torch_ddp.worker") and is_worker("frameworks.torch_ddp.comm_benchmark.worker")
    assert not is_worker("harness.contract.worker") and not is_worker("frameworks.torch_ddp.training_loop")
    assert framework_package("frameworks.shared.pytorch.ledger") == SHARED
    assert framework_package("frameworks.horovod_torch.worker") == "horovod_torch"
    assert framework_package("frameworks") is None


MODULE_LINES = 420  # "about 400"
FUNCTION_LINES = 60
# Functions of harness/ and frameworks/ still longer than FUNCTION_LINES, with why they are left so
# (path:function -> its lines when listed). A listed function that grew past its recorded length fails the test
# below, as does one that has become short enough, so that the list only shrinks.
LONG_FUNCTIONS: dict[str, int] = {}


def function_lengths() -> dict[str, int]:
    """path:function (methods and nested functions by their own name) -> lines, for harness/ and frameworks/."""
    found = {}
    for path in [*HARNESS.rglob("*.py"), *FRAMEWORKS.rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{path.relative_to(REPO)}:{node.name}"
                found[key] = max(found.get(key, 0), node.end_lineno - node.lineno + 1)
    return found


def test_no_module_is_much_over_400_lines():
    long = [f"{p.relative_to(REPO)}: {n}" for p in [*HARNESS.rglob("*.py"), *FRAMEWORKS.rglob("*.py")]
            if (n := len(p.read_text().splitlines())) > MODULE_LINES]
    assert long == []


def test_no_function_is_over_60_lines_but_the_listed_exceptions():
    lengths = function_lengths()
    long = {key: n for key, n in lengths.items() if n > FUNCTION_LINES and key not in LONG_FUNCTIONS}
    assert long == {}, "split these (or list one, saying why)"
    grown = {key: f"{lengths[key]} lines, recorded {n}" for key, n in LONG_FUNCTIONS.items() if lengths.get(key, 0) > n}
    assert grown == {}, "grown past their recorded length: split them"
    mended = [key for key in LONG_FUNCTIONS if lengths.get(key, 0) <= FUNCTION_LINES]
    assert mended == [], "no longer long (or gone): take them off LONG_FUNCTIONS"


def test_the_long_function_check_finds_a_planted_growth(monkeypatch):
    """A listed function longer than its recorded length is reported, not waved through."""
    monkeypatch.setitem(LONG_FUNCTIONS, "harness/cli/main.py:main", 3)
    with pytest.raises(AssertionError, match="grown past"):
        test_no_function_is_over_60_lines_but_the_listed_exceptions()


# torch.distributed's model-parallel packages: importing them costs a rank's start-up about as much as torch
MODEL_PARALLEL_TORCH = ("torch.distributed.fsdp", "torch.distributed.pipelining", "torch.distributed.tensor",
                        "torch.distributed.device_mesh")


def test_a_data_parallel_torch_rank_imports_no_model_parallel_package():
    """Only a run that shards, splits or pipelines its model imports those, inside the function that does."""
    modules = framework_modules()
    todo, seen, found = ["frameworks.torch_ddp.worker", "frameworks.horovod_torch.worker"], set(), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for target, top, line in imports(modules[name], set(modules)):
            if top and target.startswith(MODEL_PARALLEL_TORCH):
                found.append(f"{modules[name].relative_to(REPO)}:{line} imports {target}")
            elif top and target in modules:
                todo.append(target)
    assert found == []


def test_the_product_never_imports_the_test_bed():
    """testbed/ starts servers for tests, benchmarks and tools; harness/ and frameworks/ run without it."""
    testbed_modules = {module_name(p) for p in (REPO / "testbed").rglob("*.py")}
    found = [f"{p.relative_to(REPO)}:{line} imports {name}"
             for p in [*HARNESS.rglob("*.py"), *(REPO / "frameworks").rglob("*.py")]
             for name, _, line in imports(p, testbed_modules) if name.split(".")[0] == "testbed"]
    assert found == []
    assert ast.get_docstring(ast.parse((REPO / "testbed" / "__init__.py").read_text())), "say what testbed holds"


def test_the_verbs_parse_and_dispatch_importing_no_other_verb_in_a_chain():
    """cli/'s verb modules import console (what they share) and at most a verb that imports none."""
    shared = {"harness.cli", "harness.cli.main", "harness.cli.__main__", "harness.cli.console"}
    edges = graph()
    verbs = {m for m in edges if m.startswith("harness.cli.") and m not in shared}
    chains = [f"{a} -> {b} -> {c}" for a in verbs for b in edges[a] & verbs for c in edges[b] & verbs]
    assert verbs and chains == []


WING_SHARE = 0.15  # a wing holding more of the harness than this holds several products: split it


def test_no_wing_holds_over_15_percent_of_the_harness():
    lines = {name: sum(len(p.read_text().splitlines()) for p in (HARNESS / name).rglob("*.py")) for name in WINGS}
    total = sum(lines.values())
    large = {name: f"{n / total:.0%}" for name, n in lines.items() if n > WING_SHARE * total}
    assert large == {}, "split these wings by what they hold"
