"""Pipeline parallelism with torch.distributed.pipelining: every rank is one stage of the model.

The model is a chain of layers (ResNet-50 as stem, 16 bottleneck blocks and head; the digits MLP
layer by layer) cut into ``world`` stages of consecutive layers (``stage_split.py``): with ``balance =
"time"`` (the default) the cut whose largest stage takes the least forward and backward time, each
layer's timed on one example microbatch on rank 0 and the times broadcast (every rank cuts alike);
with ``"flops"`` the cut whose largest stage has the fewest forward FLOPs, each layer's counted by
``FlopCounterMode`` on the example microbatch (its shapes only: every rank counts the same); with
``"layers"`` stages as equal in layer count as they can be. Each step's batch
is cut into ``microbatches`` and run through ``PipelineStage`` under ``ScheduleGPipe`` (all
forwards, then all backwards) or ``Schedule1F1B`` (one forward, one backward in the steady state).
The loss is the mean over microbatches (``scale_grads``), so the gradients are those of one process
on the whole batch, whatever the cut (``tests/runs/test_pipeline_dist.py``).

Measured here, beside the usual window: each stage's busy seconds (its forward and backward
compute, timed around its layers), so its idle fraction = 1 - busy / window, which GPipe's
analysis predicts as (p - 1) / (m + p - 1) for p stages and m microbatches; and the activation
bytes each stage sends point-to-point (outputs forward, input gradients backward). Recorded with
them: which layers each stage holds, its share of the model's forward FLOPs and, cut by time, its share
of the measured time.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.utils.flop_counter import FlopCounterMode

from frameworks.shared.pytorch.batches import batch_source
from frameworks.shared.pytorch.ledger import StepLedger
from frameworks.shared.pytorch.training import dense_bytes, make_optimizer, synthetic_batch
from frameworks.torch_ddp.strategies.stage_split import by_cost, by_count, stage_costs
from harness.contract.axes import Compile, Workload
from harness.contract.events import EventWriter
from harness.contract.measure import run_measured_loop
from harness.contract.spec import RunSpec

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
# batch keys: (what enters the first stage, what the last stage's loss compares with)
BATCH_KEYS = {Workload.DIGITS: ("x", "y"), Workload.RESNET50: ("images", "labels")}


def gpipe_bubble(stages: int, microbatches: int) -> float:
    """GPipe's idle fraction of a stage (Huang et al. 2019): (p - 1) / (m + p - 1)."""
    return (stages - 1) / (microbatches + stages - 1)


def model_layers(workload: Workload, model: nn.Module) -> list[nn.Module]:
    """The model as a list of layers that run one after the other."""
    if workload == Workload.DIGITS:
        return list(model)
    if workload == Workload.RESNET50:
        head = nn.Sequential(model.pool, nn.Flatten(1), model.fc)
        return [model.stem, *(block for stage in model.stages for block in stage), head]
    raise ValueError(f"strategy pipeline: workload {workload.value} is not split into stages")


def layer_names(workload: Workload, model: nn.Module) -> list[str]:
    """Each layer of ``model_layers`` by its module path in the model (its parameters' prefix); ResNet-50's
    head (average pool, flatten, classifier) is ``pool+fc``."""
    if workload == Workload.RESNET50:
        blocks = [f"stages.{s}.{b}" for s, stage in enumerate(model.stages) for b in range(len(stage))]
        return ["stem", *blocks, "pool+fc"]
    return [name for name, _ in model.named_children()]


@torch.no_grad()
def layer_flops(layers: list[nn.Module], x: torch.Tensor) -> list[int]:
    """Each layer's forward FLOPs on ``x`` (one microbatch), run in eval mode so that no BatchNorm
    statistics move. FlopCounterMode counts matrix products and convolutions (2 FLOPs a multiply-add),
    not elementwise work (BatchNorm, ReLU, additions, pooling): few FLOPs, though not always little time."""
    flops = []
    modes = [layer.training for layer in layers]
    for layer in layers:
        layer.eval()
    for layer in layers:
        with FlopCounterMode(display=False) as counter:
            x = layer(x)
        flops.append(int(counter.get_total_flops()))
    for layer, mode in zip(layers, modes):
        layer.train(mode)
    return flops


# One untimed warm-up pass (the first runs several times slower: the allocator grows and oneDNN picks and
# builds its kernels), then the median of 5 timed passes for each layer: robust to one or two passes slowed by
# another process on a shared CPU, and 6 passes of one microbatch's forward and backward keep the start-up
# short (2.5 s for ResNet-50 tiny, microbatch 4, one thread on a loaded 2-core VM).
TIMING_PASSES = 5


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def layer_times(layers: list[nn.Module], x: torch.Tensor, passes: int = TIMING_PASSES) -> list[int]:
    """Each layer's forward and backward nanoseconds on ``x`` (one microbatch), in training mode as the
    pipeline runs it, each layer on its own input: one warm-up pass over all layers, then ``passes`` timed
    passes (pass by pass, so a burst of load falls on every layer alike), the median of each layer's.
    The backward is ``torch.autograd.grad`` of the layer's output (ones as its gradient) with respect to
    its parameters and its input (none for the first layer's input, as in the first stage), so no
    ``.grad`` is touched; BatchNorm's running statistics are put back and the random state is forked:
    timing leaves the model and what it trains as they were."""
    saved = [buffer.detach().clone() for layer in layers for buffer in layer.buffers()]
    samples: list[list[int]] = [[] for _ in layers]
    try:
        with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
            inputs = []
            with torch.no_grad():
                for layer in layers:
                    inputs.append(x)
                    x = layer(x)
            for timed in [False] + [True] * passes:
                for index, layer in enumerate(layers):
                    xi = inputs[index].detach().requires_grad_(index > 0)
                    wrt = ([xi] if index > 0 else []) + [p for p in layer.parameters() if p.requires_grad]
                    _sync(xi.device)
                    t0 = time.perf_counter_ns()
                    y = layer(xi)
                    if wrt:
                        torch.autograd.grad(y, wrt, grad_outputs=torch.ones_like(y))
                    _sync(xi.device)
                    if timed:
                        samples[index].append(time.perf_counter_ns() - t0)
    finally:
        with torch.no_grad():
            for buffer, value in zip((b for layer in layers for b in layer.buffers()), saved):
                buffer.copy_(value)
    return [int(statistics.median(times)) for times in samples]


def shares(costs: list[int], parts: list[range]) -> list[float]:
    """Each stage's share of the summed costs (equal shares if they sum to nothing)."""
    total = sum(costs)
    return [cost / total if total else 1 / len(parts) for cost in stage_costs(costs, parts)]


class StageClock(nn.Module):
    """One stage's layers, timed (forward and backward compute, seconds) and their activation traffic
    counted (bytes this stage sends point-to-point: its outputs unless last, its input gradients unless
    first). Backward is timed from the full backward pre-hook (gradients of the outputs arrived) to the
    full backward hook (gradients of the inputs computed); the first stage's inputs need no gradient
    (its full backward hook would fire at the start), so there the end is when every parameter's
    gradient is in. One microbatch's backward runs uninterrupted."""

    def __init__(self, layers: list[nn.Module], first: bool, last: bool):
        super().__init__()
        self.layers = nn.Sequential(*layers)
        self.first, self.last = first, last
        self.busy_s, self.p2p_bytes, self._backward_start = 0.0, 0, 0.0
        self.layers.register_full_backward_pre_hook(self._start_backward)
        if first:
            params = [p for p in self.layers.parameters() if p.requires_grad]
            torch.autograd.graph.register_multi_grad_hook(params, lambda grads: self._end_backward())
        else:
            self.layers.register_full_backward_hook(lambda module, grad_in, grad_out: self._end_backward())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        y = self.layers(x)
        self.busy_s += time.perf_counter() - t0
        if not self.last:
            self.p2p_bytes += y.numel() * y.element_size()
        if not self.first:
            self.p2p_bytes += x.numel() * x.element_size()  # its gradient goes back to the previous stage
        return y

    def _start_backward(self, module: nn.Module, grad_output: Any) -> None:
        self._backward_start = time.perf_counter()

    def _end_backward(self) -> None:
        self.busy_s += time.perf_counter() - self._backward_start


class Pipeline:
    """This rank's stage of ``model`` and the schedule that runs it."""

    def __init__(self, workload: Workload, model: nn.Module, options: dict[str, Any], device: torch.device,
                 example: dict[str, torch.Tensor]):
        self.rank, self.stages = dist.get_rank(), dist.get_world_size()
        if self.stages < 2:
            raise ValueError("strategy pipeline needs at least 2 ranks (one per stage)")
        self.model, self.microbatches = model, int(options["microbatches"])
        self.layers = model_layers(workload, model)
        self.names = layer_names(workload, model)
        batch = example[BATCH_KEYS[workload][0]]
        micro = batch[: len(batch) // self.microbatches]  # one microbatch
        self.flops = layer_flops(self.layers, micro)
        self.times: list[int] | None = None  # each layer's forward and backward ns, cut by time only
        if options["balance"] == "time":
            # measured on rank 0 alone (the others wait in the broadcast) and sent to every rank: times
            # differ from rank to rank and run to run, and every rank must make the same cut
            box = [layer_times(self.layers, micro) if self.rank == 0 else None]
            dist.broadcast_object_list(box, src=0)
            self.times = box[0]
            self.parts = by_cost(self.times, self.stages)
        elif options["balance"] == "flops":
            self.parts = by_cost(self.flops, self.stages)
        elif options["balance"] == "layers":
            self.parts = by_count(len(self.layers), self.stages)
        else:
            raise ValueError(f"strategy pipeline: balance {options['balance']!r} is not time, flops or layers")
        self.first, self.last = self.rank == 0, self.rank == self.stages - 1
        mine = [self.layers[i] for i in self.parts[self.rank]]
        self.clock = StageClock(mine, self.first, self.last)
        # static shapes (from a local forward of one example microbatch): PipelineStage's dynamic
        # inference would run an extra forward and backward inside the first step, timed and counted
        inputs, outputs = self.stage_shapes(example[BATCH_KEYS[workload][0]])
        stage = PipelineStage(self.clock, self.rank, self.stages, device, input_args=inputs, output_args=outputs)
        self.schedule = SCHEDULES[options["schedule"]](stage, self.microbatches, loss_fn=nn.functional.cross_entropy)
        self.input_key, self.target_key = BATCH_KEYS[workload]
        self.bytes_sent = 0  # collectives: the loss broadcast from the last stage

    @torch.no_grad()
    def stage_shapes(self, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Example input and output of this stage for one microbatch of ``batch``, computed locally
        (every rank holds the whole model) in eval mode, so no BatchNorm statistics move."""
        x = batch[: len(batch) // self.microbatches]
        mine = self.parts[self.rank]
        was_training = self.model.training
        self.model.eval()
        for index in range(mine.start):  # what the earlier stages make of it
            x = self.layers[index](x)
        inputs = x
        for index in mine:
            x = self.layers[index](x)
        self.model.train(was_training)
        # what arrives from the previous stage carries a gradient back; what leaves always does
        return inputs.requires_grad_(not self.first), x.requires_grad_(True)

    def step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Forward and backward of one batch through the pipeline; the batch's mean loss on every rank."""
        losses: list[torch.Tensor] = []
        if self.first:
            self.schedule.step(batch[self.input_key])
        elif self.last:
            self.schedule.step(target=batch[self.target_key], losses=losses)
        else:
            self.schedule.step()
        loss = torch.stack(losses).mean().detach() if self.last else torch.zeros(())
        dist.broadcast(loss, src=self.stages - 1)  # every rank's convergence guard sees the loss
        self.bytes_sent += loss.numel() * loss.element_size()
        return loss

    def stage_facts(self) -> dict[str, Any]:
        """What this stage holds: its layers' names, its share of the model's forward FLOPs and, cut by
        time, its share of the layers' measured forward and backward time."""
        facts = {"stage_layers": [self.names[i] for i in self.parts[self.rank]],
                 "flops_share": shares(self.flops, self.parts)[self.rank]}
        if self.times is not None:
            facts["time_share"] = shares(self.times, self.parts)[self.rank]
        return facts

    def gather_model(self) -> None:
        """Every stage's parameters and buffers broadcast by their owner, so every rank holds the whole
        trained model (for evaluation and the weights' checksum; outside the measured steps)."""
        for owner, part in enumerate(self.parts):
            for index in part:
                for tensor in [*self.layers[index].parameters(), *self.layers[index].buffers()]:
                    dist.broadcast(tensor.data, src=owner)


def idle_meter(clock: StageClock) -> Callable[[float], float]:
    """Call once when the window starts; the returned function gives the idle fraction of a window of
    ``seconds`` from the busy seconds since then."""
    busy_at_start = clock.busy_s
    return lambda seconds: max(0.0, 1.0 - (clock.busy_s - busy_at_start) / seconds)


class WindowStart:
    """A stage's counters when the measured window starts (after ``warmup`` steps; at once without
    warm-up): its busy seconds (for the idle fraction) and the activation bytes it had sent."""

    def __init__(self, clock: StageClock, warmup: int):
        self.clock, self.warmup = clock, warmup
        if warmup == 0:
            self.mark()

    def mark(self) -> None:
        self.idle, self.p2p = idle_meter(self.clock), self.clock.p2p_bytes

    def between_steps(self, done: int) -> None:
        if done == self.warmup:
            self.mark()

    def facts(self, window: dict[str, Any], measured_steps: int) -> dict[str, float]:
        """The window's activation bytes per step and idle fraction (of its ``seconds``)."""
        return {"p2p_bytes_per_step": (self.clock.p2p_bytes - self.p2p) / measured_steps,
                "idle_fraction": self.idle(window["seconds"])}


def refusal(spec: RunSpec) -> str | None:
    """Why this run cannot be pipelined here (None: it can); a microbatch count that does not divide the
    batch raises instead (the harness checks that before launching)."""
    if spec.compile == Compile.ON:
        return "strategy pipeline does not compile its stages (compile = off only)"
    microbatches = spec.strategy_options["microbatches"]
    if spec.batch_per_worker % microbatches:
        raise ValueError(f"strategy pipeline: microbatches {microbatches} does not divide "
                         f"batch_per_worker {spec.batch_per_worker}")
    return None


def train(spec: RunSpec, events: EventWriter, model: nn.Module, device: torch.device) -> None:
    """The worker's loop for strategy pipeline: one stage per rank. Every stage reads the same batches (the
    first uses the inputs, the last the labels); the samples are counted once, on the last stage, where
    they leave."""
    rank, world = dist.get_rank(), dist.get_world_size()
    reason = refusal(spec)
    if reason:
        events.emit("skip", reason=reason)
        dist.destroy_process_group()
        return
    options = dict(spec.strategy_options)
    next_batch, meter, data = batch_source(spec, 0, 1, device)
    # an example batch for the stages' shapes: digits has no synthetic batch, its training images do
    example = {"x": data.train_x[:spec.batch_per_worker]} if data is not None else synthetic_batch(spec, 0, device)
    pipe = Pipeline(spec.workload, model, options, device, example)
    optimizer = make_optimizer(spec, pipe.clock)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = pipe.step(next_batch())
        optimizer.step()
        return loss

    ledger = StepLedger(spec, events, model, meter, data, lambda: pipe.bytes_sent)
    start = WindowStart(pipe.clock, spec.warmup_steps)

    def between_steps(done: int) -> None:
        start.between_steps(done)
        if spec.workload == Workload.DIGITS and done % int(spec.workload_options["eval_every"]) == 0:
            pipe.gather_model()  # evaluation runs the whole model on every rank
        ledger.between_steps(done)

    window = run_measured_loop(step, sync=lambda: None, barrier=dist.barrier, warmup_steps=spec.warmup_steps,
                               measured_steps=spec.measured_steps,
                               samples_per_step=spec.batch_per_worker if pipe.last else 0, events=events,
                               loss_value=lambda t: float(t.item()), between_steps=between_steps)
    ledger.after_window(window, dense_bytes(pipe.clock), stage=rank, stages=world,
                        **start.facts(window, spec.measured_steps),
                        bubble_predicted=gpipe_bubble(world, options["microbatches"]), **pipe.stage_facts())
    pipe.gather_model()
    ledger.end()
    dist.barrier()
    dist.destroy_process_group()
