"""Pipeline parallelism in real gloo groups (3 stages of the digits MLP; 2 stages cut by layer count and by FLOPs,
which cut it differently, and by measured time), against one process."""

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from frameworks.shared.pytorch import digits  # noqa: E402
from frameworks.torch_ddp.strategies.pipeline_parallel import Pipeline, gpipe_bubble, layer_times  # noqa: E402
from frameworks.torch_ddp.strategies.stage_split import by_count  # noqa: E402
from harness.contract.axes import Workload  # noqa: E402
from tests.helpers.gloo_group import on_every_rank  # noqa: E402

STAGES = 3
STEPS = 3
BATCH = 8
HIDDEN = 6
CASES = {"gpipe_m4": ("gpipe", 4), "1f1b_m4": ("1f1b", 4), "gpipe_m2": ("gpipe", 2)}
# 2 stages: by layer count [Linear, ReLU, Linear] [ReLU, Linear]; by FLOPs (64 x 6, 0, 6 x 6, 0, 6 x 10
# multiply-adds a sample) [Linear, ReLU] [Linear, ReLU, Linear]; by time: wherever rank 0's timing puts it
BALANCES = {"layers": ("gpipe", 4, "layers"), "flops": ("gpipe", 4, "flops"), "time": ("gpipe", 4, "time")}


def _model() -> nn.Module:
    torch.manual_seed(0)
    return digits.build_model({"hidden_size": HIDDEN})


def _batches() -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(7)
    return [{"x": torch.randn(BATCH, 64, generator=generator), "y": torch.randint(0, 10, (BATCH,), generator=generator)}
            for _ in range(STEPS)]


def _flat(model: nn.Module) -> list[float]:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()


def _pipelined(schedule: str, microbatches: int, balance: str = "flops") -> dict:
    model = _model()
    pipe = Pipeline(Workload.DIGITS, model, {"schedule": schedule, "microbatches": microbatches, "balance": balance},
                    torch.device("cpu"), _batches()[0])
    optimizer = torch.optim.SGD(pipe.clock.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for batch in _batches():
        optimizer.zero_grad()
        losses.append(pipe.step(batch).item())
        optimizer.step()
    pipe.gather_model()
    return {"weights": _flat(model), "losses": losses, "p2p": pipe.clock.p2p_bytes, "busy": pipe.clock.busy_s,
            "parts": [[part.start, part.stop] for part in pipe.parts], **pipe.stage_facts()}


def _one_process() -> dict:
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for batch in _batches():
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(batch["x"]), batch["y"])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"weights": _flat(model), "losses": losses}


def _cases(rank: int) -> dict:
    return {**{name: _pipelined(*args) for name, args in CASES.items()}, "one_process": _one_process()}


def _balances(rank: int) -> dict:
    return {**{name: _pipelined(*args) for name, args in BALANCES.items()}, "one_process": _one_process()}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return on_every_rank(_cases, STAGES, tmp_path_factory.mktemp("pipeline"))


@pytest.fixture(scope="module")
def two_stages(tmp_path_factory):
    return on_every_rank(_balances, 2, tmp_path_factory.mktemp("pipeline_balance"))


@pytest.mark.parametrize("case", list(CASES))
def test_pipeline_weights_and_losses_match_one_process(results, case):
    reference = results[0]["one_process"]
    for rank in results:  # after gather_model every rank holds the whole trained model
        torch.testing.assert_close(torch.tensor(rank[case]["weights"]), torch.tensor(reference["weights"]),
                                   rtol=0, atol=1e-6)
        torch.testing.assert_close(torch.tensor(rank[case]["losses"]), torch.tensor(reference["losses"]),
                                   rtol=0, atol=1e-6)


def test_activation_bytes_per_stage(results):
    # the MLP's 5 layers in 3 stages: [Linear(64,6), ReLU], [Linear(6,6), ReLU], [Linear(6,10)]; each
    # stage boundary carries a batch x 6 activation forward and its gradient back (float32)
    boundary = BATCH * HIDDEN * 4 * STEPS
    for case in CASES:
        assert [r[case]["p2p"] for r in results] == [boundary, 2 * boundary, boundary]
        assert all(r[case]["busy"] > 0 for r in results)


def test_layer_count_cut_and_the_gpipe_bubble():
    assert by_count(5, 3) == [range(0, 2), range(2, 4), range(4, 5)]
    assert by_count(18, 4) == [range(0, 5), range(5, 10), range(10, 14), range(14, 18)]
    with pytest.raises(ValueError, match="4 stages for a model of 3 layers"):
        by_count(3, 4)
    assert gpipe_bubble(4, 4) == pytest.approx(3 / 7)
    assert gpipe_bubble(2, 8) == pytest.approx(1 / 9)


def test_timing_the_layers_leaves_the_model_and_the_random_state_as_they_were():
    torch.manual_seed(0)
    layers = [nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2)]
    before = [{k: v.clone() for k, v in layer.state_dict().items()} for layer in layers]
    x = torch.randn(4, 8)
    rng = torch.get_rng_state()
    times = layer_times(layers, x)
    assert len(times) == len(layers) and all(isinstance(t, int) and t > 0 for t in times)
    for layer, state in zip(layers, before):  # BatchNorm's running statistics put back
        assert all(torch.equal(state[k], v) for k, v in layer.state_dict().items())
    assert all(p.grad is None for layer in layers for p in layer.parameters())  # autograd.grad, not backward
    assert torch.equal(torch.get_rng_state(), rng)  # Dropout drew from a forked generator


def test_cuts_by_flops_layers_and_time_train_the_same_model(two_stages):
    assert two_stages[0]["layers"]["parts"] == [[0, 3], [3, 5]]
    assert two_stages[0]["flops"]["parts"] == [[0, 2], [2, 5]]
    assert [r["flops"]["stage_layers"] for r in two_stages] == [["0", "1"], ["2", "3", "4"]]
    # forward FLOPs a sample: 64 x 6, 6 x 6 and 6 x 10 multiply-adds; the ReLUs count none
    total = 64 * 6 + 6 * 6 + 6 * 10
    assert [r["flops"]["flops_share"] for r in two_stages] == pytest.approx([64 * 6 / total, 96 / total])
    assert [r["layers"]["flops_share"] for r in two_stages] == pytest.approx([420 / total, 60 / total])
    # by time: rank 0's measured times, broadcast, so every rank makes the same cut (whichever it is)
    assert two_stages[0]["time"]["parts"] == two_stages[1]["time"]["parts"]
    assert sum(r["time"]["time_share"] for r in two_stages) == pytest.approx(1)
    assert all("time_share" not in r[b] for r in two_stages for b in ("layers", "flops"))
    reference = two_stages[0]["one_process"]
    for rank in two_stages:
        for balance in BALANCES:
            torch.testing.assert_close(torch.tensor(rank[balance]["weights"]), torch.tensor(reference["weights"]),
                                       rtol=0, atol=1e-6)
            torch.testing.assert_close(torch.tensor(rank[balance]["losses"]), torch.tensor(reference["losses"]),
                                       rtol=0, atol=1e-6)
