"""The equivalence contract, one suite every registered framework passes (harness.contract.equivalence).

Each framework's probe runs in its own process (``python -m harness.running.probe``) and is compared with
the reference framework's probe and the published parameter counts: parameters, forward FLOPs
per sample (layer by layer), the optimizer its worker builds, and a loss that decreases on the
same fixed batch. A framework that is not installed here is skipped with the modules it lacks.
"""

import copy
import functools
import os
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

import frameworks
from harness.contract.axes import Size, Workload
from harness.contract.equivalence import (
    REFERENCE_FRAMEWORK,
    check,
    fixed_batch,
    flops_per_sample,
    probe_recipe,
    recipe,
)
from harness.contract.workloads import RESNET50_PARAMS, WORKLOADS
from harness.running.probe import expected_parameters, probed_size, probes_in_subprocess, published_workloads

TRAINING_STEPS = 4


def _probed(framework: str, env: dict[str, str]) -> dict[tuple[Workload, Size, int], dict]:
    """Every case this suite asks of a framework (full size untrained, tiny trained, each installed
    workload), probed in one fresh process with the environment ``env``."""
    info = frameworks.get(framework)
    cases = [(w, probed_size(w, size), steps) for w in published_workloads(list(info.workloads))
             if not info.missing_modules(w)
             for size, steps in ((Size.FULL, 0), (Size.TINY, TRAINING_STEPS))]
    return dict(zip(cases, probes_in_subprocess(framework, cases, env))) if cases else {}


POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)


@functools.lru_cache(maxsize=None)
def _every_framework_probed() -> dict[str, Future]:
    """Each framework's probe process, started at the first test that asks, as many at a time as there
    are cores: one probe process computes on one core, and the reports are numbers, not timings. The
    environment is copied here, in the tests' thread, which pytest's own changes to it come from."""
    return {name: POOL.submit(_probed, name, dict(os.environ)) for name in frameworks.names()}


@pytest.fixture(scope="module", autouse=True)
def _no_probe_left_waiting():
    yield
    POOL.shutdown(wait=True, cancel_futures=True)  # a run of some of these tests starts no further probe


def framework_probes(framework: str) -> dict[tuple[Workload, Size, int], dict]:
    return _every_framework_probed()[framework].result()


def probe(framework: str, workload: Workload, size: Size, steps: int) -> dict:
    """A framework's probe report, or a skip naming what it lacks here."""
    missing = frameworks.get(framework).missing_modules(workload)
    if missing:
        pytest.skip(f"{framework} is not installed here (missing {', '.join(missing)})")
    return framework_probes(framework)[(workload, probed_size(workload, size), steps)]


def cases():
    for name in frameworks.names():
        for workload in published_workloads(list(frameworks.get(name).workloads)):
            yield pytest.param(name, workload, id=f"{name}-{workload.value}")


@pytest.mark.runs
@pytest.mark.parametrize("framework, workload", list(cases()))
def test_full_size_model_matches_the_reference(framework, workload):
    report = probe(framework, workload, Size.FULL, 0)
    reference = probe(REFERENCE_FRAMEWORK, workload, Size.FULL, 0)
    problems = check(report, reference, probe_recipe(workload), expected_parameters(workload, Size.FULL))
    assert not problems, f"{framework} {workload.value} drifted from the contract:\n" + "\n".join(problems)


@pytest.mark.runs
@pytest.mark.parametrize("framework, workload", list(cases()))
def test_small_model_trains_like_the_reference(framework, workload):
    report = probe(framework, workload, Size.TINY, TRAINING_STEPS)
    reference = probe(REFERENCE_FRAMEWORK, workload, Size.TINY, TRAINING_STEPS)
    problems = check(report, reference, probe_recipe(workload))
    assert not problems, f"{framework} {workload.value} drifted from the contract:\n" + "\n".join(problems)


@pytest.mark.runs
def test_reference_flops_match_the_analytic_counts():
    """The hook-based counts agree with hand-derived formulas (2 FLOPs per multiply-add)."""
    resnet = probe(REFERENCE_FRAMEWORK, Workload.RESNET50, Size.FULL, 0)
    assert resnet["flops_per_sample"] == 8_178_368_512  # 4.09 GMACs at 224 x 224, ResNet-50 v1.5
    o = WORKLOADS[Workload.BERT].options(Size.FULL)
    s, n, h, i, v = o["seq_len"], o["num_layers"], o["hidden_size"], o["intermediate_size"], o["vocab_size"]
    encoder = n * (s * 2 * (4 * h * h + 2 * h * i) + 4 * s * s * h)
    heads = 2 * h * h + s * 2 * (h * h + h * v) + 2 * h * 2  # pooler, MLM transform + decoder, NSP
    assert probe(REFERENCE_FRAMEWORK, Workload.BERT, Size.FULL, 0)["flops_per_sample"] == encoder + heads


@pytest.mark.runs
def test_check_fails_loudly_when_a_layer_drifts():
    reference = probe(REFERENCE_FRAMEWORK, Workload.RESNET50, Size.TINY, TRAINING_STEPS)
    expected = probe_recipe(Workload.RESNET50)
    assert check(reference, reference, expected, RESNET50_PARAMS) == []
    drifted = copy.deepcopy(reference)
    drifted["layers"][3]["kernel"] = [1, 1]  # the first 3x3 (after the shortcut and the 1x1) convolution turned into 1x1
    drifted["parameters"] -= 10
    drifted["optimizer"]["weight_decay"] = 5e-5
    drifted["losses"] = drifted["losses"][::-1]
    problems = "\n".join(check(drifted, reference, expected, RESNET50_PARAMS))
    assert "parameters, the reference model has 25,557,032" in problems
    assert "forward FLOPs per sample" in problems
    assert '1 x layer {"groups": 1, "in_channels": 64, "kernel": [1, 1]' in problems  # the drifted one
    assert '1 x layer {"groups": 1, "in_channels": 64, "kernel": [3, 3]' in problems and "missing" in problems
    assert "optimizer weight_decay is 5e-05" in problems
    assert "does not decrease" in problems


def test_recipe_scales_the_resnet_learning_rate_with_the_global_batch():
    assert recipe(Workload.RESNET50, 256).lr == pytest.approx(0.1)
    assert recipe(Workload.RESNET50, 1024).lr == pytest.approx(0.4)
    assert recipe(Workload.BERT, 1024).lr == recipe(Workload.BERT, 8).lr == 1e-4


def test_fixed_batch_is_the_same_numbers_for_the_same_seed():
    opts = WORKLOADS[Workload.BERT].options(Size.TINY)
    a, b = fixed_batch(Workload.BERT, opts, 3, 7), fixed_batch(Workload.BERT, opts, 3, 7)
    assert all((a[k] == b[k]).all() for k in a)
    assert ((a["labels"] != -100).sum(axis=1) >= 1).all()  # every sequence has a predicted token
    images = fixed_batch(Workload.RESNET50, WORKLOADS[Workload.RESNET50].options(Size.TINY), 2, 7)["images"]
    assert images.shape == (2, 3, 32, 32) and images.dtype.name == "float32"


def test_flops_of_a_layer_list():
    layers = [{"op": "conv", "in_channels": 4, "out_channels": 8, "kernel": [3, 3], "stride": [1, 1], "groups": 2,
               "out_hw": [5, 5]},
              {"op": "dense", "in_features": 10, "out_features": 3, "rows": 7},
              {"op": "attention", "seq_len": 6, "hidden": 16}]
    assert flops_per_sample(layers) == 2 * 2 * 8 * 9 * 25 + 2 * 10 * 3 * 7 + 4 * 36 * 16
    with pytest.raises(ValueError, match="unknown layer op 'pool'"):
        flops_per_sample([{"op": "pool"}])


@pytest.mark.runs
def test_rosetta_equivalence_command(capsys):
    from harness.cli.main import main

    assert main(["equivalence", "--framework", REFERENCE_FRAMEWORK]) == 0
    out = capsys.readouterr().out
    assert "25,557,032" in out and "110,106,428" in out and "8.178" in out and "DRIFT" not in out
    assert main(["equivalence", "--framework", "no_such"]) == 2
