"""Hierarchical allreduce and FSDP2 in a real 4-process gloo group, against a flat allreduce and
against one process training on the whole batch (the equivalence the synchronous strategies owe)."""

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from frameworks.shared.pytorch.training import full_tensor  # noqa: E402
from frameworks.torch_ddp.strategies import wrapping  # noqa: E402
from harness.contract.axes import Strategy  # noqa: E402
from tests.helpers.gloo_group import on_every_rank  # noqa: E402

WORLD = 4
STEPS = 3


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))


def _batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + rank)
    return torch.randn(4, 5, generator=generator), torch.randint(0, 3, (4,), generator=generator)


def _train(module: nn.Module, params, batches, after_step=lambda: None) -> list[list[float]]:
    """SGD with momentum on mean cross-entropy; the flat weights after each step."""
    optimizer = torch.optim.SGD(params, lr=0.5, momentum=0.9)
    history = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        x, y = batches
        nn.functional.cross_entropy(module(x), y).backward()
        optimizer.step()
        after_step()
        history.append(torch.cat([full_tensor(p.detach()).reshape(-1) for p in params]).tolist())
    return history


def _strategy_run(strategy: Strategy, options: dict, rank: int) -> dict:
    model = _mlp()
    run = wrapping.build(strategy, options, model, None)
    params = list(run.module.parameters())
    weights = _train(run.module, params, _batch(rank), run.after_step)
    return {"weights": weights, "bytes": run.bytes_sent, "dense": run.dense_bytes_per_step,
            "inter_host": getattr(run.counter, "inter_host_bytes", None)}


def _one_process() -> dict:
    """The reference: one process, the four ranks' batches as one batch (mean loss over all of it)."""
    model = _mlp()
    batches = [_batch(r) for r in range(WORLD)]
    whole = (torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches]))
    return {"weights": _train(model, list(model.parameters()), whole)}


def _units_case(strategy_options: dict | None, rank: int) -> dict:
    """A ResNet bottleneck block (an FSDP unit of its own) and a linear root, BatchNorm in eval mode (batch
    statistics would differ between a rank's batch and the whole batch); FSDP, or one process (None)."""
    from frameworks.shared.pytorch.models import Bottleneck

    torch.manual_seed(0)
    model = nn.Sequential(Bottleneck(4, 1, 1), nn.Flatten(), nn.Linear(16, 3)).eval()
    generator = torch.Generator().manual_seed(5)
    x, y = torch.randn(4 * WORLD, 4, 2, 2, generator=generator), torch.randint(0, 3, (4 * WORLD,), generator=generator)
    if strategy_options is None:
        return {"weights": _train(model, list(model.parameters()), (x, y))}
    run = wrapping.build(Strategy.FSDP, strategy_options, model, None)
    mine = slice(4 * rank, 4 * rank + 4)
    return {"weights": _train(run.module, list(run.module.parameters()), (x[mine], y[mine]), run.after_step),
            "bytes": run.bytes_sent}


def _exact_case(strategy: Strategy, options: dict, rank: int) -> list[float]:
    """Integer gradients (loss = c . w on a bias-free layer fed with 1): sums are exact in any order."""
    model = nn.Linear(1, 7, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    run = wrapping.build(strategy, options, model, None)
    c = torch.arange(7, dtype=torch.float32).reshape(-1, 1) * (rank + 1) * 4
    (run.module(torch.ones(1, 1)).reshape(-1, 1) * c).sum().backward()
    return model.weight.grad.reshape(-1).tolist()


def _cases(rank: int) -> dict:
    cases = {
        "allreduce": _strategy_run(Strategy.ALLREDUCE, {}, rank),
        "hierarchical": _strategy_run(Strategy.HIERARCHICAL, {"local_size": 2}, rank),
        "one_rank_hosts": _strategy_run(Strategy.HIERARCHICAL, {"local_size": 1}, rank),
        "one_host": _strategy_run(Strategy.HIERARCHICAL, {"local_size": 4}, rank),
        "fsdp": _strategy_run(Strategy.FSDP, {"reshard_after_forward": True}, rank),
        "fsdp_kept": _strategy_run(Strategy.FSDP, {"reshard_after_forward": False}, rank),
        "units": _units_case({"reshard_after_forward": True}, rank),
        "units_kept": _units_case({"reshard_after_forward": False}, rank),
        "units_one_process": _units_case(None, rank),
        "exact_flat": _exact_case(Strategy.ALLREDUCE, {}, rank),
        "exact_hierarchical": _exact_case(Strategy.HIERARCHICAL, {"local_size": 2}, rank),
        "exact_one_host": _exact_case(Strategy.HIERARCHICAL, {"local_size": 4}, rank),
    }
    if rank == 0:
        cases["one_process"] = _one_process()
    return cases


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return on_every_rank(_cases, WORLD, tmp_path_factory.mktemp("model_parallel"))


def test_hierarchical_allreduce_equals_a_flat_allreduce_exactly_on_integer_gradients(results):
    # the mean over ranks of c * (rank + 1) * 4 = c * 10; 7 values: the padding to 2 chunks is cut off
    for rank in results:
        assert rank["exact_hierarchical"] == rank["exact_flat"] == [10.0 * i for i in range(7)]
        assert rank["exact_one_host"] == rank["exact_flat"]  # one host: the cross-host groups are single ranks


def test_hierarchical_training_matches_flat_allreduce_and_one_process(results):
    reference = torch.tensor(results[0]["one_process"]["weights"])
    for rank in results:
        hierarchical = torch.tensor(rank["hierarchical"]["weights"])
        torch.testing.assert_close(hierarchical, torch.tensor(rank["allreduce"]["weights"]), rtol=0, atol=1e-6)
        torch.testing.assert_close(hierarchical, reference, rtol=0, atol=1e-5)


def test_hierarchical_bytes_cross_the_host_link_once_a_chunk(results):
    # one bucket of 5*7 + 7 + 7*3 + 3 = 66 floats: padded to 66 (even), reduce-scatter hands 264 bytes,
    # the cross-host allreduce and the local all-gather 132 each
    for rank in results:
        case = rank["hierarchical"]
        assert case["dense"] == 264
        assert case["bytes"] == STEPS * (264 + 2 * 132)
        assert case["inter_host"] == STEPS * 132
        # one rank a host: only the inter-host allreduce has peers, of the whole bucket
        assert rank["one_rank_hosts"]["bytes"] == rank["one_rank_hosts"]["inter_host"] == STEPS * 264
        # one host of 4: reduce-scatter of 66 floats padded to 68 (272 bytes), all-gather of a quarter (68) only
        assert rank["one_host"]["bytes"] == STEPS * (272 + 68) and rank["one_host"]["inter_host"] == 0


@pytest.mark.parametrize("case", ["fsdp", "fsdp_kept"])
def test_fsdp_matches_one_process_on_the_whole_batch(results, case):
    # pytorch#162338: a wrong AVG reduction on gloo would scale the gradients by the world size
    reference = torch.tensor(results[0]["one_process"]["weights"])
    for rank in results:
        torch.testing.assert_close(torch.tensor(rank[case]["weights"]), reference, rtol=0, atol=1e-5)


def test_fsdp_bytes_from_the_shards(results):
    # one unit (the root): weight rows 7 and 3 padded to 8 and 4 rows; biases 7 -> 8 and 3 -> 4 values:
    # padded whole (8*5 + 8 + 4*7 + 4) * 4 = 320 bytes reduce-scattered, its quarter (80) all-gathered once
    for rank in results:
        assert rank["fsdp"]["bytes"] == STEPS * (320 + 80)
        assert rank["fsdp_kept"]["bytes"] == STEPS * (320 + 80)


def test_fsdp_units_match_one_process_and_count_each_parameter_once(results):
    for rank in results:
        reference = torch.tensor(rank["units_one_process"]["weights"])
        for case in ("units", "units_kept"):
            torch.testing.assert_close(torch.tensor(rank[case]["weights"]), reference, rtol=0, atol=1e-5)
        # the block: dim 0 of each parameter padded to 4 rows (conv1 16, bn1 4 + 4, conv2 36, bn2 4 + 4,
        # conv3 4, bn3 4 + 4: 80 floats, 320 bytes), reduce-scattered whole and its quarter all-gathered twice
        # (resharded after forward) or once; the root Linear(16, 3): 4 x 16 + 4 = 68 floats (272 bytes),
        # its quarter gathered once
        assert rank["units"]["bytes"] == STEPS * (320 + 2 * 80 + 272 + 68)
        assert rank["units_kept"]["bytes"] == STEPS * (320 + 80 + 272 + 68)
