"""The PyTorch models match the reference definitions (the equivalence contract, PyTorch side)."""

import pytest

torch = pytest.importorskip("torch")

from frameworks.shared.pytorch.models import (  # noqa: E402
    Bottleneck,
    ResNet50,
    build_bert,
    parameter_count,
)
from harness.contract.axes import Size, Workload  # noqa: E402
from harness.contract.workloads import (  # noqa: E402
    BERT_BASE_PRETRAINING_PARAMS,
    RESNET50_PARAMS,
    WORKLOADS,
)


def test_resnet50_parameter_count():
    assert parameter_count(ResNet50()) == RESNET50_PARAMS == 25_557_032


def test_resnet50_is_v1_5_stride_on_3x3():
    first_downsampling = ResNet50().stages[1][0]
    assert isinstance(first_downsampling, Bottleneck)
    assert first_downsampling.conv1.stride == (1, 1)
    assert first_downsampling.conv2.stride == (2, 2)
    assert first_downsampling.downsample[0].stride == (2, 2)


@pytest.mark.parametrize("size", [Size.TINY, Size.SMALL])
def test_resnet50_small_sizes_run_and_keep_parameters(size):
    opts = WORKLOADS[Workload.RESNET50].options(size)
    model = ResNet50(opts["num_classes"])
    out = model(torch.randn(2, 3, opts["image_size"], opts["image_size"]))
    assert out.shape == (2, 1000)
    assert parameter_count(model) == RESNET50_PARAMS


def test_bert_base_pretraining_parameter_count():
    transformers = pytest.importorskip("transformers")
    model = build_bert(WORKLOADS[Workload.BERT].options(Size.FULL))
    assert parameter_count(model) == BERT_BASE_PRETRAINING_PARAMS
    # the same as transformers' own default BertForPreTraining(BertConfig())
    reference = transformers.BertForPreTraining(transformers.BertConfig())
    assert parameter_count(reference) == BERT_BASE_PRETRAINING_PARAMS


def test_bert_tiny_forward_has_mlm_and_nsp_heads():
    pytest.importorskip("transformers")
    opts = WORKLOADS[Workload.BERT].options(Size.TINY)
    model = build_bert(opts)
    ids = torch.randint(0, opts["vocab_size"], (2, opts["seq_len"]))
    out = model(input_ids=ids, labels=ids, next_sentence_label=torch.tensor([0, 1]))
    assert out.prediction_logits.shape == (2, opts["seq_len"], opts["vocab_size"])
    assert out.seq_relationship_logits.shape == (2, 2)
    assert torch.isfinite(out.loss)


def test_llama_8b_shape_has_the_published_parameter_count_built_on_the_meta_device():
    """Llama 3.1 8B's 8,030,261,248 parameters, counted on a model built without memory (device meta)."""
    from frameworks.shared.pytorch.llama import Llama
    from harness.contract.workloads import LLAMA31_8B_PARAMS

    with torch.device("meta"):
        model = Llama(WORKLOADS[Workload.LLAMA].options(Size.FULL))
    assert parameter_count(model) == LLAMA31_8B_PARAMS
    attention = model.layers[0].attention
    assert (attention.q_proj.out_features, attention.k_proj.out_features) == (4096, 1024)  # 32 and 8 heads of 128


def test_llama_is_causal_and_learns_the_next_token():
    """A token's logits depend on the tokens before it only; the loss predicts each next token."""
    from frameworks.shared.pytorch.llama import Llama, causal_lm_loss

    opts = WORKLOADS[Workload.LLAMA].options(Size.TINY)
    torch.manual_seed(0)
    model = Llama(opts)
    ids = torch.randint(0, opts["vocab_size"], (2, opts["seq_len"]))
    changed = ids.clone()
    changed[:, 10] = (ids[:, 10] + 1) % opts["vocab_size"]
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert a.shape == (2, opts["seq_len"], opts["vocab_size"])
    torch.testing.assert_close(a[:, :10], b[:, :10])  # positions before the change see nothing of it
    assert not torch.allclose(a[:, 10:], b[:, 10:])
    loss = causal_lm_loss(a, ids)
    assert loss.item() == pytest.approx(torch.log(torch.tensor(float(opts["vocab_size"]))).item(), rel=0.05)
