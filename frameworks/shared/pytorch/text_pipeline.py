"""Real input for BERT: pre-tokenized partitions (harness.storage.textdata) streamed from a storage backend
through a torch DataLoader with workers.

Each rank reads its own partitions (rank, rank + world, ...); each loader worker its own share of the
rank's (worker, worker + workers, ...), so no object is read twice in an epoch. A partition is streamed
front to back in blocks of records, never held whole (the published partitions are 1.8 GB); the records
of a block are shuffled and cut into batches, as NVIDIA's loader shuffles within a partition. Partition
order is reshuffled every pass. A sampled partition is hashed as it streams and checked against the
manifest at its end.

Each partition read to its end is timed: ``seconds`` is the time the loader spent opening and reading it
(its last byte and checksum included) without the time its stream stood paused while the trainer had
not yet asked for more batches, so it is the storage's cost and not the step time's (NVIDIA's loader
reads a whole partition before training on it: its "load time per partition" is this); ``span_s`` is
the wall time from opening to the last byte, pauses included; ``first`` marks the first partition a
loader process opened (its storage client's set-up, a fresh connection, falls in that one). They travel
with a batch, as the byte counts do.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import numpy as np
import torch

from harness.storage import backends as storage, textdata


def stats_tensor(bytes_read: int, objects: int, verified: int) -> torch.Tensor:
    """What an item cost, carried with it out of a loader worker: bytes read, objects opened, objects
    whose checksum was verified (the Pipeline sums them in the main process)."""
    return torch.tensor([bytes_read, objects, verified], dtype=torch.int64)


def worker_share(objects: list[Any]) -> tuple[list[Any], int]:
    """This loader worker's objects (all of them in the main process) and its id."""
    info = torch.utils.data.get_worker_info()
    if info is None:
        return objects, 0
    return objects[info.id::info.num_workers], info.id


class TokenPartitions(torch.utils.data.IterableDataset):
    """An endless stream of (model batch, stats, partition loads) from a rank's partitions; batches of
    ``batch`` sequences; the loads are the partitions finished since the last batch (see :meth:`_stream`)."""

    def __init__(self, store: storage.Store, partitions: list[dict[str, Any]], batch: int,
                 options: dict[str, Any], verifier: storage.Verifier, seed: int, rank: int):
        self.store, self.partitions, self.batch = store, partitions, batch
        self.seq_len, self.vocab = int(options["seq_len"]), int(options["vocab_size"])
        self.max_pred = int(options["max_predictions"])
        self.verifier, self.seed, self.rank = verifier, seed, rank
        self.block = max(batch * 16, 1024)  # records shuffled together
        self.passes = 0  # iter() calls in this process: a persistent loader worker keeps counting
        self.opened = 0  # partitions opened in this process, likewise

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor, list[dict[str, Any]]]]:
        mine, worker = worker_share(self.partitions)
        self.passes += 1
        epoch = self.passes
        pending = stats_tensor(0, 0, 0)  # counted but not yet handed out with a batch
        loads: list[dict[str, Any]] = []  # partitions finished, likewise
        carry = None  # records left over from the last block (fewer than a batch)
        while mine:
            rng = np.random.default_rng([self.seed, self.rank, worker, epoch])
            for index in rng.permutation(len(mine)):
                rel = mine[index]["path"]
                for records, stats, load in self._stream(rel):
                    pending += stats
                    if load is not None:
                        loads.append(load)
                    records = records[rng.permutation(len(records))]
                    if carry is not None:
                        records, carry = np.concatenate([carry, records]), None
                    full = len(records) // self.batch * self.batch
                    for start in range(0, full, self.batch):
                        batch = textdata.to_model_batch(records[start:start + self.batch])
                        yield {k: torch.from_numpy(v) for k, v in batch.items()}, pending, loads
                        pending, loads = stats_tensor(0, 0, 0), []
                    carry = records[full:] if full < len(records) else None
            epoch += 1000  # an endless stream: the next epoch in this pass, distinct from later passes'

    def _stream(self, rel: str) -> Iterator[tuple[np.ndarray, torch.Tensor, dict[str, Any] | None]]:
        """Blocks of one partition with the bytes they cost. One block is read ahead, so that the end of
        the partition (and the checksum of a sampled one) is reached before its last block is handed out:
        a bad partition fails before its last records are trained on, and the count rides on them, as
        does the partition's load: path, bytes, ``seconds`` (reading, pauses left out), ``span_s``
        (open to last byte, wall) and ``first`` (this process's first partition); None with the other blocks."""
        first_here, self.opened = self.opened == 0, self.opened + 1
        opened = time.perf_counter()
        busy, resumed = 0.0, opened  # seconds spent reading; when this generator last resumed
        with self.store.open(rel, digest=self.verifier.wants(rel)) as reader:
            seen, first, held = 0, True, None
            try:
                for records in textdata.iter_blocks(reader, self.seq_len, self.max_pred, self.vocab, self.block):
                    if held is not None:
                        busy += time.perf_counter() - resumed
                        yield held
                        resumed = time.perf_counter()  # the pause was the trainer's, not the storage's
                    # frombuffer is read-only; the shuffle needs a copy anyway
                    held = (records.copy(), stats_tensor(reader.size - seen, int(first), 0), None)
                    seen, first = reader.size, False
            except textdata.MalformedPartition as exc:
                raise storage.StorageError(f"storage {self.store.backend}: object {self.store.url(rel)} "
                                           f"is not a valid partition: {exc}") from None
            verified = 0
            if reader.hash is not None:
                self.verifier.check_digest(self.store, rel, reader.hash.hexdigest(), reader.size)
                verified = 1
            tail = stats_tensor(reader.size - seen, 0, verified)
            done = time.perf_counter()
            load = {"path": rel, "bytes": reader.size, "seconds": busy + done - resumed, "span_s": done - opened,
                    "first": first_here}
            if held is None:  # a partition of no records
                yield np.zeros(0, dtype=textdata.record_dtype(self.seq_len, self.max_pred)), tail, load
            else:
                yield held[0], held[1] + tail, load
