"""Adding a workload is its declaration, a model module per family and one registry line: a toy MLP
(tests/helpers/toy_workload.py, toy_workload_torch.py) registered by that line alone trains real torch_ddp steps
(a one-rank gloo group in this process: the DDP wrapper, the fixed batch, the recipe's optimizer, the measured
loop), and the harness's model FLOPs, recipe and batch answer for it from the declaration."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from harness.base.network import free_port  # noqa: E402
from harness.contract import workloads  # noqa: E402
from harness.contract.axes import Size  # noqa: E402
from harness.contract.equivalence import fixed_batch, recipe  # noqa: E402
from harness.contract.events import EventWriter, read_rank  # noqa: E402
from harness.machines import model_flops  # noqa: E402
from tests.helpers.launch import run_spec  # noqa: E402
from tests.helpers.toy_workload import DECLARATION, Toy  # noqa: E402

REGISTRY_LINE = {Toy.MLP.value: "tests.helpers.toy_workload"}  # the one line a workload adds


@pytest.fixture
def toy(monkeypatch):
    """The toy registered by its registry line and nothing else (every other registry and module untouched)."""
    before = dict(workloads.REGISTRY)
    for name, module in REGISTRY_LINE.items():
        monkeypatch.setitem(workloads.REGISTRY, name, module)
    assert {k: v for k, v in workloads.REGISTRY.items() if k not in before} == REGISTRY_LINE
    yield Toy.MLP


def test_the_harness_answers_for_a_registered_workload_from_its_declaration(toy):
    assert workloads.DECLARATIONS[toy] is DECLARATION is workloads.DECLARATIONS["toy_mlp"]
    options = DECLARATION.options(Size.TINY)
    assert model_flops.training_flops_per_sample(toy, options) == 3 * 2 * (16 * 8 + 8 * 4)
    assert model_flops.weight_parameters(toy, options) == 16 * 8 + 8 * 4
    assert recipe(toy, 64, options).name == "sgd"
    assert fixed_batch(toy, options, 3, 0)["x"].shape == (3, 16)
    assert workloads.samples_per_step(toy, options, 5) == 5


def test_an_unregistered_workload_is_an_error_that_lists_the_known():
    with pytest.raises(KeyError, match=r"workload 'toy_mlp': unknown; known: resnet50, bert, llama, digits"):
        workloads.DECLARATIONS["toy_mlp"]


def test_a_toy_workload_added_by_its_registry_line_trains_real_torch_ddp_steps(toy, tmp_path, monkeypatch):
    from frameworks.torch_ddp import training_loop

    for name, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0",
                        "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    spec = run_spec(workload=toy, workload_options=DECLARATION.options(Size.TINY), procs_per_node=1,
                    batch_per_worker=4, warmup_steps=1, measured_steps=2)
    events = EventWriter(tmp_path, 0)
    try:
        started = training_loop.start(spec, events)
        assert isinstance(started.model, torch.nn.Sequential)  # the toy's builder's model
        training_loop.train(spec, events, started)
    finally:
        events.close()
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    record = read_rank(tmp_path, 0)
    assert record.errors == [] and record.skip is None
    assert record.window["steps"] == 2 and record.window["samples"] == 2 * 4
    assert len(record.losses) == 2 and all(math.isfinite(loss) for loss in record.losses)
    assert record.end is not None and record.end["weights_checksum"]
