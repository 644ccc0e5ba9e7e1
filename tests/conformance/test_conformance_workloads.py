"""One suite every workload in harness.contract.workloads.REGISTRY passes (a new one is picked up by itself), in
every framework that declares it: its declaration is complete and answers for each of its sizes (recipe, fixed
batch, layers, model FLOPs), and the model builder it names for each family is a module of the project that
defines what that family calls (harness.contract.workloads.declaration.FAMILIES), read without importing a
deep-learning framework; the ``runs`` tests import each family's builders in a fresh process of their own.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import numpy as np
import pytest

import frameworks
from harness.base import python_envs
from harness.contract.axes import Size
from harness.contract.equivalence import fixed_batch, flops_per_sample, layer_flops, recipe
from harness.contract.workloads import DECLARATIONS, FAMILIES, Recipe, WorkloadInfo
from harness.machines import model_flops
from tests.conformance.test_conformance_frameworks import module_path
from tests.helpers import REPO

WORKLOADS = DECLARATIONS.names()
PRESETS = [(name, size) for name in WORKLOADS for size in DECLARATIONS[name].presets]
# (framework, workload) for every workload a framework declares
DECLARED = [(framework, workload.value) for framework in frameworks.names()
            for workload in frameworks.get(framework).workloads]
# family -> the frameworks of that family that are installed here (their builders can be imported)
FAMILY_FRAMEWORKS = {family: [f for f in frameworks.names() if frameworks.get(f).family == family]
                     for family in FAMILIES}


@pytest.mark.parametrize("name", WORKLOADS)
def test_the_declaration_is_complete(name):
    info = DECLARATIONS[name]
    assert isinstance(info, WorkloadInfo) and getattr(info.name, "value", info.name) == name and info.title
    assert info.presets and all(isinstance(size, Size) for size in info.presets)
    assert info.builders and set(info.builders) <= set(FAMILIES)
    assert info.samples_option is None or all(info.samples_option in o for o in info.presets.values())
    if info.probe_size_cap is not None:
        assert info.probe_size_cap in info.presets and info.counted_parameters is not None, \
            "a capped probe checks the parameters the declaration counts from the options"
    if not info.real_data:
        assert info.batch is not None, "a workload without a dataset reader trains on its fixed batch"


@pytest.mark.parametrize("name, size", PRESETS, ids=[f"{n}-{s.value}" for n, s in PRESETS])
def test_every_size_has_a_recipe_a_batch_and_positive_model_flops(name, size):
    info = DECLARATIONS[name]
    options = info.options(size)
    plan = recipe(name, 256, options)
    assert isinstance(plan, Recipe) and plan.lr > 0 and plan.name in ("sgd", "adamw")
    layers = model_flops.forward_layers(name, options)
    assert layers and all(layer_flops(layer) > 0 for layer in layers)
    per_sample = model_flops.training_flops_per_sample(name, options, info.samples_per_item(options))
    assert per_sample > 0 and math_close(per_sample * info.samples_per_item(options), 3 * flops_per_sample(layers))
    assert model_flops.weight_parameters(name, options) > 0
    if info.batch is not None and flops_per_sample(layers) < 1e11:  # Llama 3.1 8B's 8k-token batch: not made here
        batch = fixed_batch(name, options, 2, seed=0)
        assert batch and all(len(v) == 2 and v.dtype in (np.float32, np.int64) for v in batch.values())
        again = fixed_batch(name, options, 2, seed=0)
        assert all(np.array_equal(batch[k], again[k]) for k in batch), "the fixed batch is the seed's"


def math_close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def defined_functions(module: str) -> set[str]:
    path = module_path(module)
    assert path is not None, f"{module} is no module of the project"
    return {node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("name", WORKLOADS)
def test_each_builder_defines_what_its_family_calls(name):
    for family, module in DECLARATIONS[name].builders.items():
        missing = set(FAMILIES[family]) - defined_functions(module)
        assert not missing, f"{name}'s {family} builder {module} lacks {sorted(missing)}"


@pytest.mark.parametrize("framework, name", DECLARED, ids=[f"{f}-{w}" for f, w in DECLARED])
def test_every_framework_declaring_a_workload_has_its_model(framework, name):
    info = frameworks.get(framework)
    assert info.family in FAMILIES, f"{framework}: family {info.family!r}, not one of {list(FAMILIES)}"
    assert info.family in DECLARATIONS[name].builders, f"{name} names no {info.family} model for {framework}"


def family_builders(family: str) -> list[str]:
    """The builder modules of ``family`` for the workloads its frameworks declare."""
    declared = {w.value for f in FAMILY_FRAMEWORKS[family] for w in frameworks.get(f).workloads}
    return sorted({DECLARATIONS[name].builders[family] for name in declared})


@pytest.mark.runs
@pytest.mark.parametrize("family", [f for f in FAMILIES if FAMILY_FRAMEWORKS[f]])
def test_each_familys_builders_import_in_that_family(family):
    """In a fresh process, as a worker imports them: every builder its frameworks' workloads name, with the
    functions the family calls. Skipped (saying what is missing) where none of the family is installed."""
    installed = [f for f in FAMILY_FRAMEWORKS[family] if not frameworks.get(f).missing_modules()]
    if not installed:
        missing = sorted({m for f in FAMILY_FRAMEWORKS[family] for m in frameworks.get(f).missing_modules()})
        pytest.skip(f"no {family} framework installed here (missing {', '.join(missing)})")
    modules = [m for m in family_builders(family)
               if not any(frameworks.get(f).missing_modules(w) for f in installed for w in frameworks.get(f).workloads
                          if DECLARATIONS[w].builders.get(family) == m)]
    code = ("import importlib, sys; names = sys.argv[1].split(','); mods = sys.argv[2].split(',')\n"
            "for m in mods:\n"
            "    module = importlib.import_module(m)\n"
            "    assert all(callable(getattr(module, n, None)) for n in names), m\n"
            "print(len(mods))")
    # Chainer 7.8.1 imports only with the standard library's distutils (frameworks/chainer/compat.py, which its
    # worker imports first, sets this in-process; a process started with it needs no more)
    env = {**os.environ, "SETUPTOOLS_USE_DISTUTILS": "stdlib"}
    environment = frameworks.get(installed[0]).environment  # the family's own interpreter (jax's), the harness on
    if environment is not None:                              # its path as the launchers give it
        env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([python_envs.worker_python(environment), "-c", code, ",".join(FAMILIES[family]), ",".join(modules)],
                          capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(len(modules))
