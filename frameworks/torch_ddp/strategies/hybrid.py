"""Krizhevsky's hybrid ("One weird trick for parallelizing convolutional neural networks", 2014):
data parallelism in the convolutional trunk, model parallelism in the fully connected classifier.

Every rank runs ResNet-50's trunk (everything but ``fc``) on its own batch of b images: features f_r
[b, 2048]. The features are all-gathered with the autograd-aware ``torch.distributed.nn.functional.all_gather``
into F [W b, 2048] on every rank. Rank s holds column shard s of the classifier, Linear(2048, C / W): the
weight rows and biases of classes s C/W .. (s + 1) C/W - 1, and computes its logits shard Z_s = F A_s^T + c_s
for all W b images; the shards are all-gathered (autograd-aware) into the full logits Z [W b, C] on every
rank, and the labels (a plain all-gather) into y [W b]. L, the mean cross-entropy of Z over the W b images,
is the loss of the global batch, the same number on every rank.

The scaling. Every rank backpropagates L / W. An autograd all-gather's backward hands each rank the sum,
over the ranks, of the gradients they computed for its piece (a reduce-scatter), so:

* logits: every rank computed dL/dZ / W for the whole of Z; rank s receives W x dL/dZ_s / W = dL/dZ_s, the
  exact gradient of its shard, and so the exact gradient of its classifier shard, (dL/dZ_s)^T F and the
  column sums of dL/dZ_s: the classifier's gradients need no exchange;
* features: on rank s, F reaches L only through Z_s, so rank s holds G_s = dL/dZ_s A_s, what its classes
  contribute to dL/dF; rank r receives the sum over s of its own rows of G_s, which is dL/df_r, exact;
* trunk: rank r backpropagates dL/df_r through its own images only, which gives the part of dL/dtheta its
  images contribute; the true gradient is the sum over the ranks. The trunk is wrapped in DDP (one initial
  broadcast, bucketed allreduce overlapping the backward pass) with a communication hook that allreduces
  with SUM: DDP's default average would divide the gradient by W a second time.

Without the 1 / W every gradient would come out W times too large (W ranks backpropagate the same L into
the same shards). ``tests/runs/test_hybrid_dist.py`` checks the trunk and the gathered classifier against one
process on the global batch, and against DDP's allreduce. As in DDP, BatchNorm normalizes each rank's batch
on its own.

Bytes, the payload this rank hands to collectives per step (as everywhere in this package): the labels'
all-gather (b int64), the features' all-gather (its b x 2048 input) and, in backward, their reduce-scatter
(the W b x 2048 gradient it starts from; gloo has no reduce-scatter, torch emulates it with scatters of the
same tensors), the logits' all-gather (its W b x C/W shard) and reduce-scatter (the W b x C gradient), and
the trunk's allreduce (its gradient buckets, counted in the hook).
"""

# no ``from __future__ import annotations``: DDP checks the hook's annotations as objects (dist.GradBucket)
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.nn.functional import all_gather
from torch.nn.parallel import DistributedDataParallel as DDP

from frameworks.shared.pytorch import checkpointing, numerics, runtime
from frameworks.shared.pytorch.batches import batch_source
from frameworks.shared.pytorch.ledger import StepLedger
from frameworks.shared.pytorch.training import dense_bytes, make_optimizer
from harness.contract.axes import Compile, Storage
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec
from harness.contract.workloads import classifier_split_reason


def nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


@dataclass
class HybridBytes:
    """Payload this rank handed to collectives: the trunk's gradient allreduce, and the activations'
    all-gathers and their backward reduce-scatters (features, logits, labels)."""

    trunk: int = 0
    activations: int = 0

    @property
    def bytes_sent(self) -> int:
        return self.trunk + self.activations


def allreduce_sum_hook(counter: HybridBytes, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket's SUM over the ranks (not DDP's average: see the module's derivation)."""
    buffer = bucket.buffer()
    counter.trunk += nbytes(buffer)
    return dist.all_reduce(buffer, async_op=True).get_future().then(lambda fut: fut.value()[0])


def trunk_of(model: nn.Module) -> nn.Module:
    """ResNet-50 without its classifier: images -> pooled features [batch, 2048] (the model's own modules)."""
    return nn.Sequential(model.stem, model.stages, model.pool, nn.Flatten(1))


class Hybrid(nn.Module):
    """What this rank trains: the trunk (DDP, SUM hook) and its column shard of the classifier. The trunk's
    modules are ``model``'s own; the shard starts as a copy of its rows of ``model.fc``."""

    def __init__(self, model: nn.Module, device_ids: list[int] | None = None):
        super().__init__()
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        full = model.fc
        reason = classifier_split_reason(full.out_features, self.world)
        if reason:
            raise ValueError(reason)
        self.counter = HybridBytes()
        self.trunk = DDP(trunk_of(model), device_ids=device_ids)  # broadcasts rank 0's trunk
        self.trunk.register_comm_hook(self.counter, allreduce_sum_hook)
        shard = full.out_features // self.world
        self.columns = slice(self.rank * shard, (self.rank + 1) * shard)
        self.classifier = nn.Linear(full.in_features, shard, device=full.weight.device, dtype=full.weight.dtype)
        with torch.no_grad():
            for tensor in (full.weight, full.bias):  # every rank slices the same classifier: rank 0's
                dist.broadcast(tensor, src=0)
            self.classifier.weight.copy_(full.weight[self.columns])
            self.classifier.bias.copy_(full.bias[self.columns])

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(L / W, what to backpropagate; L, detached): L is the mean cross-entropy over the global batch."""
        features = self.trunk(images)  # [b, 2048], this rank's images
        gathered = torch.cat(all_gather(features))  # [W b, 2048], rank order
        shard = self.classifier(gathered)  # [W b, C / W], this rank's classes
        logits = torch.cat(all_gather(shard), dim=1)  # [W b, C], classes in rank order
        targets = [torch.empty_like(labels) for _ in range(self.world)]
        dist.all_gather(targets, labels)
        loss = nn.functional.cross_entropy(logits, torch.cat(targets))
        self.counter.activations += nbytes(labels) + nbytes(features) + nbytes(shard)
        if torch.is_grad_enabled():  # backward reduce-scatters both gradients
            self.counter.activations += self.world * (nbytes(features) + nbytes(shard))
        return loss / self.world, loss.detach()

    @torch.no_grad()
    def gather_classifier(self, full: nn.Linear) -> None:
        """Every rank's shard into ``full`` on every rank (for the weights' checksum; outside the window)."""
        for mine, whole in ((self.classifier.weight, full.weight), (self.classifier.bias, full.bias)):
            pieces = [torch.empty_like(mine) for _ in range(self.world)]
            dist.all_gather(pieces, mine.contiguous())
            whole.copy_(torch.cat(pieces))


def train(spec: RunSpec, events: EventWriter, model: nn.Module, device: torch.device,
          device_ids: list[int] | None) -> None:
    """The worker's loop for strategy hybrid: every rank reads its own share of the data (data parallel)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    reason = classifier_split_reason(model.fc.out_features, world)
    if spec.compile == Compile.ON:
        reason = "strategy hybrid does not compile its model (compile = off only)"
    if reason:
        events.emit("skip", reason=reason)
        dist.destroy_process_group()
        return
    hybrid = Hybrid(model, device_ids)
    optimizer = make_optimizer(spec, hybrid)
    next_batch, meter, data = batch_source(spec, rank, world, device)
    scaler = numerics.grad_scaler(spec, device.type)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        batch = next_batch()
        with numerics.autocast(spec, device.type):
            scaled, loss = hybrid(batch["images"], batch["labels"])
        scaler.scale(scaled).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    ledger = StepLedger(spec, events, model, meter, data, lambda: hybrid.counter.bytes_sent)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    window: dict[str, Any] = run_measured_loop(
        step, sync=sync, barrier=dist.barrier, warmup_steps=spec.warmup_steps, measured_steps=spec.measured_steps,
        samples_per_step=spec.batch_per_worker, events=events, loss_value=lambda t: float(t.item()),
        between_steps=ledger.between_steps, device_memory=runtime.device_memory(device.type))
    ledger.after_window(window, dense_bytes(model))  # what allreduce of the whole model's gradients would send
    hybrid.gather_classifier(model.fc)  # every rank holds the whole trained model
    if spec.storage != Storage.SYNTHETIC:
        checkpointing.phase(spec, events, rank, world, model)
    ledger.end()
    dist.barrier()
    dist.destroy_process_group()
