"""The house's rules, checked on the source: wings import one way, no import circles (imports inside
functions included), no deep-learning framework imported at module level by the harness, and the
frameworks' workers reach only the contract, the storage readers and the ground floor."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "harness"

# Bottom to top: a wing may import the wings before it, never one after it (harness/<wing>/__init__.py).
WINGS = ["base", "contract", "storage", "launchers", "experiment", "results", "running", "reports", "export",
         "comm", "scaling", "cli"]
FRAMEWORK_MODULES = {"torch", "tensorflow", "keras", "chainer", "chainermn", "horovod", "mpi4py", "jax", "cupy",
                     "transformers", "tf_keras"}
WORKER_MAY_IMPORT = {"base", "contract", "storage"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def harness_modules() -> dict[str, Path]:
    return {module_name(p): p for p in HARNESS.rglob("*.py")}


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


def graph() -> dict[str, set[str]]:
    modules = harness_modules()
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
    known = set(harness_modules())
    wrong = [f"{p.relative_to(REPO)}:{line} imports {name}" for p in (REPO / "frameworks").rglob("*.py")
             for name, _, line in imports(p, known)
             if name.startswith("harness.") and wing(name) not in WORKER_MAY_IMPORT]
    assert wrong == []


def test_no_module_is_much_over_400_lines():
    long = [f"{p.relative_to(REPO)}: {n}" for p in [*HARNESS.rglob("*.py"), *(REPO / "frameworks").rglob("*.py")]
            if (n := len(p.read_text().splitlines())) > 420]
    assert long == []


# torch.distributed's model-parallel packages: importing them costs a rank's start-up about as much as torch
MODEL_PARALLEL_TORCH = ("torch.distributed.fsdp", "torch.distributed.pipelining", "torch.distributed.tensor",
                        "torch.distributed.device_mesh")


def test_a_data_parallel_torch_rank_imports_no_model_parallel_package():
    """Only a run that shards, splits or pipelines its model imports those, inside the function that does."""
    modules = {module_name(p): p for p in (REPO / "frameworks").rglob("*.py")}
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
