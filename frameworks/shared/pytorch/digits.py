"""The time-to-accuracy workload: an MLP on scikit-learn's handwritten digits (real data, no download).

1,797 images of 8x8 pixels (values 0..16, scaled to 0..1), 10 classes. A fixed 20% is held
out (the same split on every rank and run, drawn with a fixed seed) and only evaluated on.
Each rank trains on its own shard of the rest (every world_size-th image), in an order
reshuffled every epoch from (seed, rank, epoch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

import torch
from torch import nn

HOLDOUT_FRACTION = 0.2
SPLIT_SEED = 12345  # the held-out split does not depend on the run's seed: runs compare on the same images


@dataclass(frozen=True)
class DigitsData:
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor


def load(device: torch.device) -> DigitsData:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(SPLIT_SEED))
    n_test = round(len(x) * HOLDOUT_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return DigitsData(x[train].to(device), y[train].to(device), x[test].to(device), y[test].to(device))


def build_model(options: Mapping[str, int | float]) -> nn.Module:
    hidden = int(options["hidden_size"])
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


def batches(data: DigitsData, rank: int, world: int, batch: int, seed: int) -> Iterator[dict[str, torch.Tensor]]:
    """Endless minibatches of this rank's shard, reshuffled every epoch."""
    shard = torch.arange(rank, len(data.train_x), world)
    epoch = 0
    while True:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + rank * 1009 + epoch)
        order = shard[torch.randperm(len(shard), generator=gen)]
        for start in range(0, len(order) - batch + 1, batch):  # drop the last partial batch
            idx = order[start:start + batch].to(data.train_x.device)
            yield {"x": data.train_x[idx], "y": data.train_y[idx]}
        epoch += 1


@torch.no_grad()
def evaluate(model: nn.Module, data: DigitsData) -> tuple[float, float]:
    """(accuracy as a fraction, mean cross-entropy) on the held-out images."""
    was_training = model.training
    model.eval()
    logits = model(data.test_x)
    model.train(was_training)
    accuracy = (logits.argmax(1) == data.test_y).float().mean().item()
    return accuracy, nn.functional.cross_entropy(logits, data.test_y).item()
