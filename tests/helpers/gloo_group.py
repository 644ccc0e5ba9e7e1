"""Run a function on every rank of a real gloo process group (spawned processes) and collect what it returns."""

import json
from pathlib import Path
from typing import Callable

import torch.distributed as dist
import torch.multiprocessing as mp


def _rank_main(rank: int, fn: Callable[[int], dict], world: int, folder: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{folder}/init", rank=rank, world_size=world)
    Path(folder, f"rank{rank}.json").write_text(json.dumps(fn(rank)))
    dist.barrier()  # no rank closes its connections while another still uses them
    dist.destroy_process_group()


def on_every_rank(fn: Callable[[int], dict], world: int, folder: Path) -> list[dict]:
    """``fn(rank)`` (a module-level function: it is pickled by name) on ``world`` ranks; the results by rank."""
    mp.spawn(_rank_main, args=(fn, world, str(folder)), nprocs=world, join=True)
    return [json.loads((Path(folder) / f"rank{r}.json").read_text()) for r in range(world)]
