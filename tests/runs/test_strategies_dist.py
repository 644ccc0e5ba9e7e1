"""The strategies in real 2-process gloo groups, on models small enough to compute by hand.

Every parameter update is w <- w - lr * grad with lr = 1 and a loss whose gradient does not
depend on w (grad = c, different on each rank), so the expected weights after each step are
plain arithmetic: minus the running sum of what the strategy made of the c's.
"""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402

from frameworks.torch_ddp.strategies import wrapping  # noqa: E402
from harness.contract.axes import Strategy  # noqa: E402

WORLD = 2


def _train(strategy: Strategy, options: dict, per_rank_c: list[list[float]], steps: int, rank: int):
    """A (c-shaped) linear layer of weight w fed with 1: loss = c . w, so grad = c and, with SGD
    at lr 1, every step subtracts the (combined) c from w. Returns weights after each step and bytes."""
    torch.manual_seed(0)
    model = nn.Linear(1, len(per_rank_c[0]), bias=False)
    with torch.no_grad():
        model.weight.zero_()
    run = wrapping.build(strategy, options, model, None)
    optimizer = torch.optim.SGD(run.module.parameters(), lr=1.0)
    c = torch.tensor(per_rank_c[rank]).reshape(-1, 1)
    weights = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = (run.module(torch.ones(1, 1)).reshape(-1, 1) * c).sum()
        loss.backward()
        optimizer.step()
        run.after_step()
        weights.append(model.weight.detach().reshape(-1).tolist())
    run.finish()
    return {"weights": weights, "final": model.weight.detach().reshape(-1).tolist(), "bytes": run.bytes_sent,
            "dense": run.dense_bytes_per_step}


def _worker(rank: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    cases = {
        "onebit": _train(Strategy.ONEBIT, {"error_feedback": True}, [[1, -2, 3], [-1, 4, 2]], 3, rank),
        "onebit_no_ef": _train(Strategy.ONEBIT, {"error_feedback": False}, [[1, -2, 3], [-1, 4, 2]], 3, rank),
        "local_sgd": _train(Strategy.LOCAL_SGD, {"tau": 3}, [[1], [3]], 4, rank),
        "bmuf": _train(Strategy.BMUF, {"block_steps": 2, "block_momentum": 0.5, "block_lr": 1.0,
                                       "nesterov": True}, [[1], [3]], 4, rank),
        "allreduce": _train(Strategy.ALLREDUCE, {}, [[1, -2, 3], [-1, 4, 2]], 1, rank),
        "fp16": _train(Strategy.FP16, {}, [[1, -2, 3], [-1, 4, 2]], 1, rank),
        "powersgd": _train(Strategy.POWERSGD, {"rank": 1, "start_iter": 2, "error_feedback": True},
                           [[1, -2, 3], [-1, 4, 2]], 1, rank),
    }
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(cases))
    dist.barrier()  # neither rank closes its connections while the other still uses them
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    mp.spawn(_worker, args=(str(tmp / "init"), str(tmp)), nprocs=WORLD, join=True)
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(WORLD)]


def test_onebit_hook_averages_the_decoded_messages(results):
    # step 1: rank 0 sends [1,-2,3] as [2,-2,2] (kept error [-1,0,1]); rank 1 sends [-1,4,2] as
    # [-1,3,3] (kept [0,1,-1]); both apply the mean [0.5,0.5,2.5]
    # step 2: rank 0 sends [0,-2,4] -> [2,-2,2] (kept [-2,0,2]); rank 1 [-1,5,1] -> [-1,3,3] (kept [0,2,-2])
    # step 3: rank 0 sends [-1,-2,5] -> [-1.5,-1.5,5]; rank 1 [-1,6,0] -> [-1,3,3]; mean [-1.25,0.75,4]
    for rank in results:
        assert rank["onebit"]["weights"] == [[-0.5, -0.5, -2.5], [-1.0, -1.0, -5.0], [0.25, -1.75, -9.0]]
        # a 3-value column: 1 byte of bits + 2 float32 means, per step
        assert rank["onebit"]["bytes"] == 3 * 9 and rank["onebit"]["dense"] == 12


def test_onebit_without_error_feedback_repeats_the_same_error(results):
    # every step sends the same [2,-2,2] and [-1,3,3]: the error of step 1 is never made up for
    for rank in results:
        assert rank["onebit_no_ef"]["weights"] == [[-0.5, -0.5, -2.5], [-1.0, -1.0, -5.0], [-1.5, -1.5, -7.5]]


def test_local_sgd_averages_after_tau_steps(results):
    r0, r1 = results[0]["local_sgd"], results[1]["local_sgd"]
    # local steps subtract 1 (rank 0) and 3 (rank 1); after 3 steps -3 and -9 are averaged to -6
    assert [w[0] for w in r0["weights"]] == [-1.0, -2.0, -6.0, -7.0]
    assert [w[0] for w in r1["weights"]] == [-3.0, -6.0, -6.0, -9.0]
    # finish() averages the unfinished block: (-7 - 9) / 2
    assert r0["final"] == r1["final"] == [-8.0]
    assert r0["bytes"] == 4  # one averaging of one float32 in 4 steps


def test_bmuf_block_momentum_by_hand(results):
    r0, r1 = results[0]["bmuf"], results[1]["bmuf"]
    # block 1: ranks reach -2 and -6, mean -4, G = -4, delta = -4, W = -4, next start -4 + 0.5 * -4 = -6
    # block 2: from -6 ranks reach -8 and -12, mean -10, G = -4, delta = -6, W = -10, start -13
    assert [w[0] for w in r0["weights"]] == [-1.0, -6.0, -7.0, -13.0]
    assert [w[0] for w in r1["weights"]] == [-3.0, -6.0, -9.0, -13.0]
    assert r0["final"] == r1["final"] == [-10.0]  # the global model, not the look-ahead
    assert r0["bytes"] == 2 * 4


def test_allreduce_and_compression_hooks_agree_on_this_case(results):
    for rank in results:
        assert rank["allreduce"]["weights"] == [[0.0, -1.0, -2.5]]
        assert rank["fp16"]["weights"] == [[0.0, -1.0, -2.5]]  # exact in fp16
        assert rank["allreduce"]["bytes"] == 12 and rank["fp16"]["bytes"] == 6
        # PowerSGD runs plain allreduce before start_iter
        assert rank["powersgd"]["weights"] == [[0.0, -1.0, -2.5]] and rank["powersgd"]["bytes"] == 12
