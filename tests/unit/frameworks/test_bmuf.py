"""The BMUF update formula (Chen and Huo 2016) against hand-computed cases."""

import pytest

torch = pytest.importorskip("torch")

from frameworks.torch_ddp.strategies.bmuf import block_update  # noqa: E402


def t(*values):
    return torch.tensor(values, dtype=torch.float64)


def test_block_update_by_hand():
    # W(t-1) = 1, block started at 1, workers' mean 3 -> G = 2; delta(t-1) = 0.5
    # delta = 0.5 * 0.5 + 1.0 * 2 = 2.25; W = 1 + 2.25 = 3.25; Nesterov start = 3.25 + 0.5 * 2.25
    glob, delta, start = block_update(t(1.0), t(1.0), t(3.0), t(0.5), block_momentum=0.5, block_lr=1.0,
                                      nesterov=True)
    assert glob.tolist() == [3.25] and delta.tolist() == [2.25] and start.tolist() == [4.375]
    _, _, plain_start = block_update(t(1.0), t(1.0), t(3.0), t(0.5), block_momentum=0.5, block_lr=1.0,
                                     nesterov=False)
    assert plain_start.tolist() == [3.25]


def test_block_lr_scales_the_block_update():
    # G = averaged - block start (not - global): with Nesterov the block starts ahead of W
    glob, delta, _ = block_update(t(0.0), t(1.0), t(2.0), t(0.0), block_momentum=0.9, block_lr=0.5,
                                  nesterov=True)
    assert delta.tolist() == [0.5] and glob.tolist() == [0.5]


def test_two_blocks_by_hand():
    glob, delta, start = t(0.0, 0.0), t(0.0, 0.0), t(0.0, 0.0)
    glob, delta, start = block_update(glob, start, t(1.0, -1.0), delta, block_momentum=0.5, block_lr=1.0,
                                      nesterov=True)
    assert glob.tolist() == [1.0, -1.0] and start.tolist() == [1.5, -1.5]
    # second block: workers move from 1.5 to a mean of 2.5 -> G = 1; delta = 0.5 + 1 = 1.5; W = 2.5
    glob, delta, start = block_update(glob, start, t(2.5, -2.5), delta, block_momentum=0.5, block_lr=1.0,
                                      nesterov=True)
    assert glob.tolist() == [2.5, -2.5] and delta.tolist() == [1.5, -1.5] and start.tolist() == [3.25, -3.25]


def test_no_momentum_and_unit_lr_is_model_averaging():
    averaged = t(0.3, -1.7, 2.0)
    glob, delta, start = block_update(t(1.0, 1.0, 1.0), t(1.0, 1.0, 1.0), averaged, t(9.0, 9.0, 9.0),
                                      block_momentum=0.0, block_lr=1.0, nesterov=True)
    assert torch.allclose(glob, averaged, rtol=0, atol=1e-15) and torch.allclose(start, averaged, rtol=0, atol=1e-15)
