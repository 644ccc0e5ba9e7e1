"""1-bit SGD with error feedback (Seide, Fu, Droppo, Li, Yu; Interspeech 2014) as a DDP communication hook.

Every gradient tensor is viewed as a matrix whose columns are quantized separately
(a weight of shape (out, ...) is a matrix of shape (out, rest); a 1-D tensor is one
column). Each value becomes one bit, its sign; a column is reconstructed as the mean
of its non-negative values where the bit is 1 and the mean of its negative values
where it is 0, so the reconstruction keeps every column's sum. With error feedback,
the difference between what a worker meant to send and what it sent is kept and
added to its next gradient, so no part of the gradient is lost, only delayed.

On the wire each worker sends, per bucket, the bits packed 8 to a byte and two
float32 numbers per column; workers all-gather these, every worker decodes every
other worker's message and averages them in the same order, so all ranks apply the
same update. Works on any backend with all_gather (gloo, NCCL).
"""

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

_SHIFTS = torch.arange(7, -1, -1, dtype=torch.uint8)  # bit 0 of a group of 8 is the high bit of its byte


def column_shape(shape: torch.Size) -> tuple[int, int]:
    """(rows, columns) of the matrix a tensor is quantized as: (shape[0], rest) for 2-D and up,
    (numel, 1) for 1-D (and scalars)."""
    return (shape[0], shape.numel() // shape[0]) if len(shape) > 1 else (shape.numel(), 1)


def as_columns(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.reshape(column_shape(tensor.shape))


def quantize_columns(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One bit per value (True where value >= 0) and, per column, the mean of the non-negative
    values and the mean of the negative values (0 for a column with none)."""
    bits = matrix >= 0
    positives = bits.sum(0)
    negatives = matrix.shape[0] - positives
    zero = torch.zeros((), dtype=matrix.dtype, device=matrix.device)
    pos_mean = torch.where(bits, matrix, zero).sum(0) / positives.clamp(min=1)
    neg_mean = torch.where(bits, zero, matrix).sum(0) / negatives.clamp(min=1)
    return bits, pos_mean, neg_mean


def dequantize_columns(bits: torch.Tensor, pos_mean: torch.Tensor, neg_mean: torch.Tensor) -> torch.Tensor:
    return torch.where(bits, pos_mean, neg_mean)


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """A flat bool tensor as uint8, 8 bits a byte (padded with zeros)."""
    pad = (-bits.numel()) % 8
    padded = torch.cat([bits.reshape(-1), bits.new_zeros(pad)]) if pad else bits.reshape(-1)
    groups = padded.reshape(-1, 8).to(torch.uint8)
    return (groups << _SHIFTS.to(bits.device)).sum(1, dtype=torch.uint8)


def unpack_bits(packed: torch.Tensor, count: int) -> torch.Tensor:
    """Inverse of :func:`pack_bits`: the first ``count`` bits as a flat bool tensor."""
    bits = (packed.unsqueeze(1) >> _SHIFTS.to(packed.device)) & 1
    return bits.reshape(-1)[:count].bool()


@dataclass
class Message:
    """What one worker sends for one bucket: packed bits and the per-column means."""

    packed: torch.Tensor  # uint8
    means: torch.Tensor  # float32: every column's positive mean, then every column's negative mean

    @property
    def nbytes(self) -> int:
        return self.packed.numel() * self.packed.element_size() + self.means.numel() * self.means.element_size()


def encode(flat: torch.Tensor, shapes: list[torch.Size]) -> tuple[Message, torch.Tensor]:
    """Quantize a flat buffer holding tensors of ``shapes`` back to back.

    Returns the message and the flat reconstruction (what the receivers will decode)."""
    bits, pos, neg, recon = [], [], [], []
    offset = 0
    for shape in shapes:
        n = shape.numel()
        matrix = as_columns(flat[offset:offset + n].reshape(shape))
        b, p, q = quantize_columns(matrix)
        bits.append(b.reshape(-1))
        pos.append(p)
        neg.append(q)
        recon.append(dequantize_columns(b, p, q).reshape(-1))
        offset += n
    message = Message(pack_bits(torch.cat(bits)), torch.cat(pos + neg).to(torch.float32))
    return message, torch.cat(recon)


def decode(message: Message, shapes: list[torch.Size], dtype: torch.dtype) -> torch.Tensor:
    """The flat reconstruction of a message (same layout as :func:`encode`'s input)."""
    numel = sum(s.numel() for s in shapes)
    bits = unpack_bits(message.packed, numel)
    columns = [column_shape(s) for s in shapes]
    total_cols = sum(c[1] for c in columns)
    pos_all, neg_all = message.means[:total_cols].to(dtype), message.means[total_cols:].to(dtype)
    out, offset, col = [], 0, 0
    for rows, cols in columns:
        b = bits[offset:offset + rows * cols].reshape(rows, cols)
        out.append(dequantize_columns(b, pos_all[col:col + cols], neg_all[col:col + cols]).reshape(-1))
        offset += rows * cols
        col += cols
    return torch.cat(out)


@dataclass
class OnebitState:
    """Per-worker state of the hook: the quantization error per bucket and the bytes sent."""

    error_feedback: bool = True
    process_group: dist.ProcessGroup | None = None
    residuals: dict[int, torch.Tensor] = field(default_factory=dict)  # bucket index -> flat error
    bytes_sent: int = 0  # bytes of every message this worker handed to all_gather


def compress_step(state: OnebitState, bucket_index: int, flat: torch.Tensor,
                  shapes: list[torch.Size]) -> Message:
    """Add the kept error (if error feedback is on), quantize, keep the new error; the message."""
    kept = state.residuals.get(bucket_index)
    if kept is not None and kept.numel() != flat.numel():
        kept = None  # DDP rebuilt its buckets after the first step: this index now holds other gradients
    target = flat + kept if state.error_feedback and kept is not None else flat.clone()
    message, recon = encode(target, shapes)
    if state.error_feedback:
        state.residuals[bucket_index] = target - recon
    return message


def onebit_hook(state: OnebitState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: all-gather every worker's 1-bit message, decode, average.

    The collectives run synchronously inside the hook (simple and backend-agnostic; it gives up
    overlapping this bucket's communication with the rest of the backward pass)."""
    buffer = bucket.buffer()
    shapes = [g.shape for g in bucket.gradients()]
    group = state.process_group or dist.group.WORLD
    world = dist.get_world_size(group)
    message = compress_step(state, bucket.index(), buffer, shapes)
    state.bytes_sent += message.nbytes
    packed_all = [torch.empty_like(message.packed) for _ in range(world)]
    means_all = [torch.empty_like(message.means) for _ in range(world)]
    dist.all_gather(packed_all, message.packed, group=group)
    dist.all_gather(means_all, message.means, group=group)
    total = torch.zeros_like(buffer)
    for packed, means in zip(packed_all, means_all):  # same order on every rank: same sum
        total += decode(Message(packed, means), shapes, buffer.dtype)
    buffer.copy_(total / world)
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(buffer)
    return future
