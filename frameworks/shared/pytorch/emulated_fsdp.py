"""FSDP2 on emulated accelerators (strategy fsdp, device emulated, ``exchange = "gradients"``: docs/scaling.md,
"FSDP on the emulated cluster").

The rank is an emulated one (emulated_gradients.EmulatedModel: the real model's parameters, each layer's compute
slept at its profiled share) sharded by the real ``fully_shard``, unit by unit as frameworks/torch_ddp/strategies
/fsdp.py shards a training rank's model; its forward calls each unit, so that FSDP's own hooks gather the unit's
parameters before its layers and reduce-scatter their gradients after its backward, through gloo over the
emulated cluster's shaped links. What the emulation adds to FSDP, and why:

- A unit's layers wait for their gathered parameters (EmulatedModel.run_units, the clock's ``hold``): on a GPU
  the compute stream waits for the all-gather's, so an all-gather that outlasts the layer before it delays the
  step. Its arrival is the moment gloo completed it (:class:`TimedAllGather`).
- Every all-gather is started asynchronously and each unit prefetches the next one's in the forward (FSDP2's
  explicit forward prefetch; its backward prefetches one unit by default): a GPU's CPU thread runs ahead of its
  kernels and so issues the next unit's all-gather while the current unit computes, which an emulated rank,
  whose thread sleeps through each layer, would not.
- The reduce-scatter runs on the backward's thread (FSDP2 calls it synchronously; on a GPU it is queued on its
  own stream): the backward's deadlines are counted from the pass's start, so a reduce-scatter shorter than the
  next unit's layers is hidden behind them as a GPU's is, and the last one delays the step's end. It is a ring
  of gloo's point-to-point sends (:func:`ring_reduce_scatter`), not gloo's reduce-scatter, an allreduce.
- ``gpus_per_rank`` G: what a ring through every GPU has beyond the processes' real ring is timed as for DDP
  (emulated_host.InHost): its W - P missing latency steps at the slowest hop's latency, and the in-host ring
  through the W GPUs over ``intra_link`` as a floor, one collective at a time; ``gradient_scale`` s: the
  parameters 1/s of their size (emulated_gradients.scaled_model), the links s times slower (the launcher's).
- Mixed precision as the profiled runs had it: FSDP2's ``MixedPrecisionPolicy`` gathers the parameters in the
  run's half precision (amp_bf16: bfloat16, amp_fp16: float16) and reduces the gradients in float32
  (torchtitan's bf16 parameters and fp32 reduce); fp32 gathers float32.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter

from frameworks.shared.pytorch.emulated_gradients import EmulatedModel
from harness.machines import emulated_cluster

GATHERED_DTYPE = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}  # precision -> all-gather dtype


class InHostTiming:
    """The part of a collective through all W GPUs that a process standing for G of them does not run: the ring's
    W - P missing latency steps (each at the slowest hop's latency) and, as a floor, the in-host ring through
    the W GPUs over ``intra_link`` (the in-host link carrying one collective at a time); all dilated by k.
    Without ``gpus_per_rank`` both are 0 (the processes' real ring is the whole ring)."""

    def __init__(self, emulation: Mapping[str, Any], world: int, nodes: int):
        gpus_per_rank = int(emulation.get("gpus_per_rank", 1))
        intra, inter = emulation.get("intra_link"), emulation.get("inter_link")
        self.intra = emulated_cluster.link(intra) if intra and gpus_per_rank > 1 else None
        hop = emulated_cluster.link(inter) if inter and nodes > 1 else self.intra
        self.gpus = world * gpus_per_rank
        self.scale, self.k = int(emulation.get("gradient_scale", 1)), float(emulation["dilation"])
        steps = max(0, self.gpus - max(world, 1)) if gpus_per_rank > 1 else 0  # a ring's W-1 steps against P-1
        self.extra_s = steps * (hop.latency_s if hop else 0.0) * self.k
        self.free_at = 0.0  # perf_counter s when the in-host link is done with the collectives so far
        self.lock = threading.Lock()

    def done_at(self, start: float, finished: float, nbytes: int) -> float:
        """When a collective started at ``start`` over ``nbytes`` (the gathered or reduced whole, scaled) that
        gloo finished at ``finished`` is done in the emulated cluster (perf_counter s)."""
        if self.intra is None:
            return finished + self.extra_s
        with self.lock:
            floor = emulated_cluster.ring_gather_s(self.intra, self.gpus, nbytes * self.scale) * self.k
            self.free_at = max(start, self.free_at) + floor
            return max(finished + self.extra_s, self.free_at)


class TimedAllGather(AllGather):
    """FSDP2's all-gather of one unit, always asynchronous (gloo's own thread), noting when it is done."""

    def __init__(self, timing: InHostTiming):
        self.timing, self.done = timing, None  # the last gather's future: when gloo finished, then when done

    def allocate(self, size, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup,
                 async_op: bool = False) -> dist.Work:
        start, nbytes = time.perf_counter(), output_tensor.numel() * output_tensor.element_size()
        work = dist.all_gather_single(output_tensor, input_tensor, group=group, async_op=True)
        self.done = work.get_future().then(lambda _: self.timing.done_at(start, time.perf_counter(), nbytes))
        return work

    def ready_at(self) -> float:
        """When the last gather's parameters arrived (perf_counter s; 0 before any): FSDP has waited for
        gloo's part, the callback's may still be running."""
        return self.done.wait() if self.done is not None else 0.0


class TimedReduceScatter(ReduceScatter):
    """FSDP2's reduce-scatter of one unit's gradients, on the backward's thread, held until it is done.

    gloo's own reduce-scatter is an allreduce and a slice: each rank sends 2(n-1)/n of the input, twice a ring
    reduce-scatter's (n-1)/n (counted on loopback: 2.0 and 6.0 times the input over all ranks at n = 2 and 4,
    as its allreduce, where its all-gather sends 1.0 and 3.0). So it runs as a ring here (NCCL's algorithm),
    through gloo's point-to-point sends: n - 1 steps, each rank sending one chunk to the next and adding the
    one it receives, so that each link, a host's network card included, carries what a ring's does."""

    def __init__(self, timing: InHostTiming):
        self.timing = timing

    def allocate(self, size, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup,
                 op: Any, async_op: bool = False) -> None:
        start, nbytes = time.perf_counter(), input_tensor.numel() * input_tensor.element_size()
        ring_reduce_scatter(output_tensor, input_tensor, group)
        if op == dist.ReduceOp.AVG:
            output_tensor.div_(group.size())
        remaining = self.timing.done_at(start, time.perf_counter(), nbytes) - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)


def ring_reduce_scatter(output: torch.Tensor, input_: torch.Tensor, group: dist.ProcessGroup) -> None:
    """The sum of every rank's ``input_`` chunk r (of n equal ones) into rank r's ``output``, by a ring: at step
    s rank r sends its running chunk r - s - 1 to rank r + 1 and adds chunk r - s - 2 from rank r - 1 into its
    own, so that after n - 1 steps its chunk r holds every rank's (each rank sends (n-1)/n of the input)."""
    n, rank = group.size(), group.rank()
    chunks = input_.view(n, -1).clone()
    received = torch.empty_like(chunks[0])
    right, left = dist.get_global_rank(group, (rank + 1) % n), dist.get_global_rank(group, (rank - 1) % n)
    for step in range(n - 1):
        sent = dist.isend(chunks[(rank - step - 1) % n], right, group=group)
        dist.recv(received, left, group=group)
        chunks[(rank - step - 2) % n] += received
        sent.wait()
    output.copy_(chunks[rank])


def shard(emulated: EmulatedModel, units: list[nn.Module], reshard_after_forward: bool, precision: str,
          emulation: Mapping[str, Any], nodes: int) -> None:
    """``fully_shard`` the units, then the root (``emulated``), as fsdp.shard does a training rank's model, with
    timed collectives, the forward's prefetch and the units' layers held for their gathers (module docstring)."""
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    policy = MixedPrecisionPolicy(param_dtype=GATHERED_DTYPE.get(precision, torch.float32),
                                  reduce_dtype=torch.float32)
    timing = InHostTiming(emulation, world, nodes)
    gathers: dict[int, TimedAllGather] = {}
    emulated.run_units(units, lambda unit: gathers[id(unit)].ready_at())
    modules: list[FSDPModule] = []
    for module in (*units, emulated):
        fully_shard(module, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=policy)
        gathers[id(module)] = TimedAllGather(timing)
        module.set_custom_all_gather(gathers[id(module)])
        module.set_custom_reduce_scatter(TimedReduceScatter(timing))
        modules.append(module)
    root, blocks = modules[-1], modules[:-1]
    # a GPU's thread runs ahead of its kernels: the root gathers the first unit, each unit the next
    for module, following in zip([root, *blocks], blocks):
        module.set_modules_to_forward_prefetch([following])
