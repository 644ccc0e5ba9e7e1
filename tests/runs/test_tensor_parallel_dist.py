"""Tensor parallelism on BERT tiny and the Llama decoder tiny in a real 2-process gloo group, against one process
on the same batch."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


from frameworks.shared.pytorch.llama import Llama, causal_lm_loss  # noqa: E402
from frameworks.shared.pytorch.models import build_bert  # noqa: E402
from frameworks.shared.pytorch.training import full_tensor  # noqa: E402
from frameworks.torch_ddp.strategies.tensor_parallel import parallelize  # noqa: E402
from harness.contract.axes import Size, Workload  # noqa: E402
from harness.contract.equivalence import fixed_batch  # noqa: E402
from harness.contract.workloads import WORKLOADS  # noqa: E402
from tests.helpers.gloo_group import on_every_rank  # noqa: E402

WORLD = 2
STEPS = 2
BATCH = 2


def _model():
    torch.manual_seed(0)
    model = build_bert(WORKLOADS[Workload.BERT].options(Size.TINY))
    for module in model.modules():  # no dropout: both sides must draw nothing at random
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    model.config.attention_probs_dropout_prob = 0.0
    return model


def _batch():
    batch = fixed_batch(Workload.BERT, WORKLOADS[Workload.BERT].options(Size.TINY), BATCH, 0)
    return {k: torch.from_numpy(v) for k, v in batch.items()}


def _train(model, counter=None):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = model(**_batch()).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    weights = torch.cat([full_tensor(p.detach()).reshape(-1) for p in model.parameters()])
    return {"losses": losses, "weights_sum": weights.double().abs().sum().item(),
            "weights_head": weights[:2000].tolist(),
            "bytes": counter.bytes_sent if counter else None}


def _llama():
    torch.manual_seed(0)
    return Llama(WORKLOADS[Workload.LLAMA].options(Size.TINY))


def _train_llama(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    ids = torch.from_numpy(fixed_batch(Workload.LLAMA, WORKLOADS[Workload.LLAMA].options(Size.TINY), BATCH, 0)["input_ids"])
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = causal_lm_loss(model(ids), ids)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    weights = torch.cat([full_tensor(p.detach()).reshape(-1) for p in model.parameters()])
    return {"losses": losses, "weights_sum": weights.double().abs().sum().item()}


def _cases(rank: int) -> dict:
    model = _model()
    counter = parallelize(model, "cpu")
    llama = _llama()
    parallelize(llama, "cpu")  # 4 query heads, 2 key-value heads, FFN 224: 2 and 1 and 112 per rank
    return {"tp": _train(model, counter), "one_process": _train(_model()),
            "llama_tp": _train_llama(llama), "llama_one_process": _train_llama(_llama())}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return on_every_rank(_cases, WORLD, tmp_path_factory.mktemp("tp"))


def test_tensor_parallel_bert_matches_one_process(results):
    reference = results[0]["one_process"]
    for rank in results:
        torch.testing.assert_close(torch.tensor(rank["tp"]["losses"]), torch.tensor(reference["losses"]),
                                   rtol=0, atol=1e-4)
        torch.testing.assert_close(torch.tensor(rank["tp"]["weights_head"]), torch.tensor(reference["weights_head"]),
                                   rtol=0, atol=1e-4)
        assert rank["tp"]["weights_sum"] == pytest.approx(reference["weights_sum"], rel=1e-5)


def test_allreduce_bytes_follow_the_layout(results):
    # one layer: 2 row-wise outputs allreduced forward, 4 column-wise input gradients backward, each
    # a batch x seq x hidden float32 activation (2 x 32 x 64 x 4 = 16 KiB)
    activation = BATCH * 32 * 64 * 4
    for rank in results:
        assert rank["tp"]["bytes"] == STEPS * 6 * activation


def test_tensor_parallel_llama_with_grouped_query_heads_matches_one_process(results):
    reference = results[0]["llama_one_process"]
    for rank in results:
        torch.testing.assert_close(torch.tensor(rank["llama_tp"]["losses"]), torch.tensor(reference["losses"]),
                                   rtol=0, atol=1e-4)
        assert rank["llama_tp"]["weights_sum"] == pytest.approx(reference["weights_sum"], rel=1e-5)
