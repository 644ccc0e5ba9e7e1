"""1-bit SGD quantization and error feedback against hand-computed cases."""

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings, strategies as st  # noqa: E402

from frameworks.torch_ddp.strategies import onebit  # noqa: E402
from frameworks.torch_ddp.strategies.onebit import OnebitState, compress_step, decode, encode  # noqa: E402


def test_quantize_columns_by_hand():
    matrix = torch.tensor([[1.0, -2.0], [3.0, -4.0], [-1.0, 0.0]])
    bits, pos, neg = onebit.quantize_columns(matrix)
    # column 0: positives 1, 3 -> 2; negatives -1 -> -1.  column 1: 0 counts as positive -> 0; -2, -4 -> -3
    assert bits.tolist() == [[True, False], [True, False], [False, True]]
    assert pos.tolist() == [2.0, 0.0] and neg.tolist() == [-1.0, -3.0]
    assert onebit.dequantize_columns(bits, pos, neg).tolist() == [[2.0, -3.0], [2.0, -3.0], [-1.0, 0.0]]


def test_a_column_of_one_sign_has_a_zero_mean_for_the_other():
    bits, pos, neg = onebit.quantize_columns(torch.tensor([[1.0], [2.0]]))
    assert pos.tolist() == [1.5] and neg.tolist() == [0.0]


def test_column_shapes():
    assert onebit.column_shape(torch.Size([4, 3, 2, 2])) == (4, 12)  # conv weight: out x (in*kh*kw)
    assert onebit.column_shape(torch.Size([5])) == (5, 1)  # a bias is one column
    assert onebit.column_shape(torch.Size([])) == (1, 1)


def test_pack_bits_by_hand():
    bits = torch.tensor([1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 1], dtype=torch.bool)
    packed = onebit.pack_bits(bits)
    assert packed.dtype == torch.uint8
    assert packed.tolist() == [0b10110001, 0b10100000]  # padded with zeros to whole bytes
    assert onebit.unpack_bits(packed, 11).tolist() == bits.tolist()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=70))
def test_pack_unpack_round_trip(values):
    bits = torch.tensor(values, dtype=torch.bool)
    assert onebit.unpack_bits(onebit.pack_bits(bits), len(values)).tolist() == values


def test_message_size_and_decode_match_encode():
    shapes = [torch.Size([3, 2]), torch.Size([2])]
    flat = torch.tensor([1.0, -2.0, 3.0, -4.0, -1.0, 0.0, 5.0, -6.0])
    message, recon = encode(flat, shapes)
    assert recon.tolist() == [2.0, -3.0, 2.0, -3.0, -1.0, 0.0, 5.0, -6.0]
    assert decode(message, shapes, torch.float32).tolist() == recon.tolist()
    # 8 bits -> 1 byte; 3 columns -> 3 positive and 3 negative float32 means
    assert message.nbytes == 1 + 6 * 4
    # quantization keeps every column's sum
    assert recon[:6].view(3, 2).sum(0).tolist() == flat[:6].view(3, 2).sum(0).tolist()


def test_error_feedback_over_three_steps_by_hand():
    shapes = [torch.Size([3])]
    gradient = torch.tensor([1.0, -2.0, 3.0])
    state = OnebitState(error_feedback=True)
    sent = [decode(compress_step(state, 0, gradient, shapes), shapes, torch.float32) for _ in range(3)]
    # step 1: v = [1,-2,3] -> [2,-2,2], error [-1,0,1]
    # step 2: v = [0,-2,4] -> [2,-2,2] (0 counts as positive), error [-2,0,2]
    # step 3: v = [-1,-2,5] -> [-1.5,-1.5,5], error [0.5,-0.5,0]
    assert [s.tolist() for s in sent] == [[2.0, -2.0, 2.0], [2.0, -2.0, 2.0], [-1.5, -1.5, 5.0]]
    assert state.residuals[0].tolist() == [0.5, -0.5, 0.0]
    # nothing is lost, only delayed: what was sent = what was meant - what is still kept
    assert (sum(sent) + state.residuals[0]).tolist() == (3 * gradient).tolist()


def test_without_error_feedback_the_error_accumulates():
    shapes = [torch.Size([3])]
    gradient = torch.tensor([1.0, -2.0, 3.0])
    state = OnebitState(error_feedback=False)
    sent = [decode(compress_step(state, 0, gradient, shapes), shapes, torch.float32) for _ in range(3)]
    assert [s.tolist() for s in sent] == [[2.0, -2.0, 2.0]] * 3
    assert not state.residuals
    assert (sum(sent) - 3 * gradient).tolist() == [3.0, 0.0, -3.0]  # grows by [1, 0, -1] every step


def test_error_feedback_is_per_bucket():
    shapes = [torch.Size([2])]
    state = OnebitState()
    compress_step(state, 0, torch.tensor([1.0, 3.0]), shapes)
    compress_step(state, 1, torch.tensor([-1.0, -3.0]), shapes)
    assert state.residuals[0].tolist() == [-1.0, 1.0] and state.residuals[1].tolist() == [1.0, -1.0]


def test_a_residual_of_a_rebuilt_bucket_is_dropped():
    # DDP rebuilds its buckets after the first step: the same index may then hold a different size
    state = onebit.OnebitState()
    onebit.compress_step(state, 0, torch.ones(6), [torch.Size([6])])
    message = onebit.compress_step(state, 0, torch.arange(4.0), [torch.Size([4])])
    assert state.residuals[0].numel() == 4 and message.nbytes > 0
