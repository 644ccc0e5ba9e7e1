"""An emulated rank's layer shares (frameworks/shared/pytorch/emulated_gradients.layer_shares): counted on the
meta device for every PyTorch workload, BERT's included, whose all-ones attention mask transformers reads a
value of (``padding_mask.all()``), which a meta tensor has none of."""

import pytest

from harness.contract.axes import Size, Workload
from harness.contract.workloads import WORKLOADS


class _Spec:
    seed = 0

    def __init__(self, workload: Workload, scale: int = 1):
        self.workload, self.workload_options = workload, WORKLOADS[workload].options(Size.TINY)
        self.emulation = {"gradient_scale": scale}


@pytest.mark.parametrize("workload", [Workload.BERT, Workload.LLAMA, Workload.RESNET50])
def test_shares_are_counted_on_the_meta_device_for_every_workload(workload):
    pytest.importorskip("torch")
    from frameworks.shared.pytorch import emulated_gradients

    shares = emulated_gradients.layer_shares(_Spec(workload, scale=4))
    owners = emulated_gradients._owners(emulated_gradients.scaled_model(_Spec(workload, scale=4), 4))
    assert len(shares) == len(owners) and sum(shares) == pytest.approx(1.0) and min(shares) >= 0


def test_bert_counted_without_its_all_ones_mask_has_the_flops_of_the_masked_model():
    """Without the mask a real CPU forward makes the FLOPs it makes with it (the same matmuls), and the count on
    meta runs (where it also sees the attention's QK^T and AV, which the CPU's fused kernel hides from it)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from frameworks.shared.pytorch import emulated_gradients
    from frameworks.shared.pytorch.training import build_model, loss_of
    from harness.contract.equivalence import fixed_batch

    options = dict(WORKLOADS[Workload.BERT].options(Size.TINY))
    batch = fixed_batch(Workload.BERT, options, 1, 0)
    assert "attention_mask" in batch and "attention_mask" not in emulated_gradients.meta_batch(batch)

    def flops(device, arrays):
        with torch.device(device):
            model = build_model(Workload.BERT, options).eval()
        counter = FlopCounterMode(display=False)
        with counter:
            loss_of(Workload.BERT, model, {k: torch.from_numpy(v).to(device) for k, v in arrays.items()})
        return counter.get_total_flops()

    unmasked = emulated_gradients.meta_batch(batch)
    assert flops("cpu", unmasked) == flops("cpu", batch) > 0
    assert flops("meta", unmasked) >= flops("cpu", batch)
    padded = {**batch, "attention_mask": batch["attention_mask"].copy()}
    padded["attention_mask"][0, -1] = 0  # a real padding mask is kept (its values matter)
    assert "attention_mask" in emulated_gradients.meta_batch(padded)
