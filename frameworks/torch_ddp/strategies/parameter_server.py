"""Parameter servers over torch.distributed.rpc (TensorPipe, CPU): synchronous, and Downpour SGD.

The model's tensors are split over ``servers`` shards (whole tensors, balanced by bytes, the way
ps-lite assigns key ranges); shard ``s`` lives in rank ``s``'s process and is served by its RPC
threads, beside that rank's own training (servers co-located with workers, as MXNet's dist kvstore
places them). Every step a worker pushes each shard its gradient and gets the shard's current
tensors back in the same call (a fused push and pull: one round trip per shard and step).

* synchronous (``ps_sync``): a shard waits for every worker's gradient, applies their mean once,
  and answers all of them with the new tensors: the same update as gradient allreduce.
* asynchronous (``ps_async``, Downpour, Dean et al. 2012): a shard applies each gradient as it
  comes, under the shard's lock, and answers at once. With ``max_staleness`` = k >= 0, the answer
  waits until every worker has pushed at least (this worker's pushes - k) times (stale synchronous
  parallel, Ho et al. 2013), so no worker runs more than k steps ahead of the slowest.

The optimizer lives on the servers (the workers hold no optimizer state). A push's staleness is
the number of updates the shard applied between the worker's pull of the tensors it computed
its gradient on and the application of its own gradient (0 in synchronous training).
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import rpc

Snapshot = tuple[int, list[torch.Tensor]]  # (updates applied, the shard's tensors)
Reply = tuple[int, Snapshot]  # (the push's staleness, the shard's state when the worker may go on)

_SHARDS: dict[int, "Shard"] = {}  # the shards this process serves, by index (read by the RPC functions)


def tensor_bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def assign_shards(sizes: list[int], servers: int) -> list[list[int]]:
    """Tensor indices per shard: largest tensors first, each to the lightest shard so far."""
    if servers < 1:
        raise ValueError("servers must be >= 1")
    shards: list[list[int]] = [[] for _ in range(servers)]
    load = [0] * servers
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lightest = load.index(min(load))
        shards[lightest].append(index)
        load[lightest] += sizes[index]
    return [sorted(s) for s in shards]


@dataclass
class Shard:
    """One server's part of the model, its optimizer and its counters (bytes are tensor payloads)."""

    tensors: list[torch.Tensor]
    make_optimizer: Callable[[nn.Module], torch.optim.Optimizer]
    workers: int
    synchronous: bool
    max_staleness: int = -1  # asynchronous only; -1: no bound
    first_counted_push: int = 1  # a worker's pushes from this one on (1-based) count in bytes_in/out
    version: int = 0  # updates applied
    bytes_in: int = 0  # gradient payload of the counted pushes
    bytes_out: int = 0  # tensors sent back in reply to them
    clocks: list[int] = field(default_factory=list)  # pushes per worker
    waiting: list[tuple[int, int, torch.futures.Future]] = field(default_factory=list)  # worker, staleness
    gradient_sum: list[torch.Tensor] | None = None  # synchronous: this step's gradients so far

    def __post_init__(self) -> None:
        self.params = nn.ParameterList([nn.Parameter(t.detach().clone()) for t in self.tensors])
        self.optimizer = self.make_optimizer(self.params)
        self.clocks = [0] * self.workers
        self.lock = threading.Lock()

    def push(self, worker: int, pulled_version: int, gradients: list[torch.Tensor]) -> torch.futures.Future:
        """Take a worker's gradient, computed on the shard's tensors of ``pulled_version``; the future
        completes with a :data:`Reply` when the worker may go on."""
        future: torch.futures.Future = torch.futures.Future()
        with self.lock:
            self.clocks[worker] += 1
            # Counted by the pushing worker's own step, not by when the server saw it: asynchronous
            # workers start their measured windows at different times.
            if self.clocks[worker] >= self.first_counted_push:
                self.bytes_in += tensor_bytes(gradients)
            # updates applied since the worker's pull, before this gradient's own (synchronous: 0)
            self.waiting.append((worker, self.version - pulled_version, future))
            if self.synchronous:
                self.gradient_sum = gradients if self.gradient_sum is None else \
                    [a + g for a, g in zip(self.gradient_sum, gradients)]
                if len(self.waiting) == self.workers:
                    self._apply([g / self.workers for g in self.gradient_sum])
                    self.gradient_sum = None
            else:
                self._apply(gradients)
            ready = self._ready()
            snapshot = self._snapshot() if ready else None
            counted = sum(self.clocks[w] >= self.first_counted_push for w, _, _ in ready)
            self.bytes_out += counted * tensor_bytes(snapshot[1]) if ready else 0
        for _, staleness, fut in ready:  # outside the lock: completing a future runs the RPC layer's reply
            fut.set_result((staleness, snapshot))
        return future

    def pull(self) -> Snapshot:
        """The shard's state (the final load after training: outside every window, not counted)."""
        with self.lock:
            return self._snapshot()

    def _apply(self, gradients: list[torch.Tensor]) -> None:
        for param, gradient in zip(self.params, gradients):
            param.grad = gradient
        self.optimizer.step()
        self.version += 1

    def _ready(self) -> list[tuple[int, int, torch.futures.Future]]:
        """Futures whose worker may go on: all once a synchronous step is applied; asynchronously those
        within ``max_staleness`` pushes of the slowest worker."""
        if self.synchronous:
            if self.gradient_sum is not None or len(self.waiting) < self.workers:
                return []
            ready, self.waiting = self.waiting, []
            return ready
        slowest = min(self.clocks)
        go = [self.max_staleness < 0 or self.clocks[w] - slowest <= self.max_staleness for w, _, _ in self.waiting]
        ready = [entry for entry, ok in zip(self.waiting, go) if ok]
        self.waiting = [entry for entry, ok in zip(self.waiting, go) if not ok]
        return ready

    def _snapshot(self) -> Snapshot:
        return self.version, [p.detach().clone() for p in self.params]


@rpc.functions.async_execution
def _push(index: int, worker: int, pulled_version: int, gradients: list[torch.Tensor]) -> torch.futures.Future:
    return _SHARDS[index].push(worker, pulled_version, gradients)


def _pull(index: int) -> Snapshot:
    return _SHARDS[index].pull()


def _agent(rank: int) -> str:
    return f"ps{rank}"


def rpc_endpoint() -> str:
    """A free port on the rendezvous host, picked by rank 0 and shared over the process group
    (the launcher's own store port is already taken by the process group)."""
    chosen = [None]
    if dist.get_rank() == 0:
        with socket.socket() as sock:
            sock.bind(("", 0))
            chosen[0] = f"tcp://{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{sock.getsockname()[1]}"
    dist.broadcast_object_list(chosen, src=0)
    return chosen[0]


class ParameterServerTraining:
    """A worker's side: push gradients, load the tensors that come back, count bytes and staleness.

    Call :meth:`exchange` after ``backward()`` (instead of an optimizer step) and :meth:`finish`
    at the end (every worker then holds the servers' final model). ``tcp_only``: TensorPipe's TCP
    transport and plain channel between every pair, also within a host (not shared memory)."""

    def __init__(self, model: nn.Module, make_optimizer: Callable[[nn.Module], torch.optim.Optimizer], *,
                 servers: int, synchronous: bool, max_staleness: int = -1, warmup_steps: int = 0,
                 tcp_only: bool = False):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        if servers > self.world:
            raise ValueError(f"servers = {servers} but the run has {self.world} processes to host them")
        self.params = list(model.parameters())
        self.shards = assign_shards([p.numel() for p in self.params], servers)
        self.versions = [0] * servers  # the version of each shard this worker's tensors came from
        self.bytes_sent = 0  # gradient bytes pushed by this worker
        self.bytes_received = 0
        self.staleness: list[int] = []  # per push: updates applied in between (the most over shards)
        self.served: Shard | None = None  # the shard this rank hosts (kept after finish for its counters)
        if self.rank < servers:
            self.served = Shard([self.params[i] for i in self.shards[self.rank]], make_optimizer,
                                self.world, synchronous, max_staleness, warmup_steps + 1)
            _SHARDS[self.rank] = self.served
        endpoint = rpc_endpoint()
        # Under torchrun, tcp:// rendezvous would only dial the elastic agent's store (a client to our
        # fresh port, which nobody serves): without that variable rank 0 serves the RPC store itself.
        agent_store = os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        transports = {"_transports": ["uv"], "_channels": ["basic"]} if tcp_only else {}
        try:
            rpc.init_rpc(_agent(self.rank), rank=self.rank, world_size=self.world,
                         rpc_backend_options=rpc.TensorPipeRpcBackendOptions(init_method=endpoint, **transports))
        finally:
            if agent_store is not None:
                os.environ["TORCHELASTIC_USE_AGENT_STORE"] = agent_store

    def exchange(self) -> None:
        """Push this step's gradients to every shard, then load what each shard sends back."""
        futures = []
        for index, members in enumerate(self.shards):
            gradients = [self.params[i].grad.detach() for i in members]
            self.bytes_sent += tensor_bytes(gradients)
            futures.append(rpc.rpc_async(_agent(index), _push, args=(index, self.rank, self.versions[index],
                                                                      gradients)))
        worst = 0
        for index, future in enumerate(futures):
            staleness, (version, tensors) = future.wait()
            worst = max(worst, staleness)
            self._load(index, version, tensors)
        self.staleness.append(worst)

    def _load(self, index: int, version: int, tensors: list[torch.Tensor]) -> None:
        self.bytes_received += tensor_bytes(tensors)
        self.versions[index] = version
        with torch.no_grad():
            for i, tensor in zip(self.shards[index], tensors):
                self.params[i].copy_(tensor)

    def finish(self) -> None:
        """Every worker loads the servers' final tensors, then the RPC agents stop together."""
        dist.barrier()  # every push is applied
        for index in range(len(self.shards)):
            self._load(index, *rpc.rpc_sync(_agent(index), _pull, args=(index,)))
        rpc.shutdown(graceful=True)
        _SHARDS.pop(self.rank, None)
