"""The parameter-server shard's rules (synchronous mean, Downpour as-they-come, the staleness bound),
its sharding, Hogwild's one-host rule, the strategies' options and the parameter server in the
scaling model: checked in one process, by hand."""

import pytest

torch = pytest.importorskip("torch")

from frameworks.torch_ddp.strategies.hogwild import one_host_problem, threads_per_process  # noqa: E402
from frameworks.torch_ddp.strategies.parameter_server import Shard, assign_shards  # noqa: E402
from harness.base.config import Where  # noqa: E402
from harness.base.errors import UserError  # noqa: E402
from harness.contract.axes import CommAlgorithm, Strategy  # noqa: E402
from harness.experiment.strategies import parse_options, resolved  # noqa: E402
from harness.scaling.model import Link, Network, parameter_server_s, predict  # noqa: E402

LR = 0.5


def _shard(workers, synchronous, max_staleness=-1):
    return Shard([torch.zeros(2)], lambda m: torch.optim.SGD(m.parameters(), lr=LR), workers, synchronous,
                 max_staleness)


def _grad(*values):
    return [torch.tensor(values, dtype=torch.float32)]


def test_a_synchronous_shard_applies_the_mean_once_every_worker_has_pushed():
    shard = _shard(2, synchronous=True)
    first = shard.push(0, 0, _grad(1.0, 2.0))
    assert not first.done() and shard.version == 0  # waits for the other worker
    second = shard.push(1, 0, _grad(3.0, 6.0))
    assert first.done() and second.done() and shard.version == 1
    staleness, (version, tensors) = first.wait()
    assert staleness == 0 and version == 1
    assert tensors[0].tolist() == pytest.approx([-LR * 2.0, -LR * 4.0])  # minus lr x mean gradient
    assert shard.bytes_in == 16 and shard.bytes_out == 16  # two pushes in, two replies out, 8 B each


def test_downpour_applies_each_push_as_it_comes_and_counts_staleness():
    shard = _shard(2, synchronous=False)
    a = shard.push(0, 0, _grad(1.0, 1.0))  # worker 0 computed on version 0
    b = shard.push(1, 0, _grad(1.0, 1.0))  # worker 1 also on version 0: one update landed in between
    c = shard.push(0, 1, _grad(1.0, 1.0))  # worker 0 on version 1: worker 1's update landed since
    assert [f.wait()[0] for f in (a, b, c)] == [0, 1, 1]
    assert shard.version == 3 and shard.params[0].tolist() == pytest.approx([-3 * LR, -3 * LR])


def test_bytes_count_each_workers_own_measured_pushes_whenever_they_arrive():
    # one warm-up push each: worker 0 is already measuring while worker 1 still warms up
    shard = Shard([torch.zeros(2)], lambda m: torch.optim.SGD(m.parameters(), lr=LR), 2, False,
                  first_counted_push=2)
    shard.push(0, 0, _grad(1.0, 1.0))  # worker 0's warm-up
    shard.push(0, 1, _grad(1.0, 1.0))  # worker 0's first measured push
    assert shard.bytes_in == 8 and shard.bytes_out == 8
    shard.push(1, 0, _grad(1.0, 1.0))  # worker 1's warm-up, arriving after worker 0's measured one
    shard.push(1, 3, _grad(1.0, 1.0))
    assert shard.bytes_in == 16 and shard.bytes_out == 16
    shard.pull()  # the final load after training is outside every window
    assert shard.bytes_out == 16


def test_the_staleness_bound_holds_a_worker_that_runs_ahead():
    shard = _shard(2, synchronous=False, max_staleness=0)
    first = shard.push(0, 0, _grad(1.0, 0.0))
    assert not first.done()  # worker 0 is one push ahead of worker 1: it waits
    other = shard.push(1, 0, _grad(1.0, 0.0))
    assert first.done() and other.done()
    assert shard.version == 2  # both applied as they came; only the replies waited


def test_shards_split_whole_tensors_balanced_by_size():
    # largest first to the lightest shard: 100 -> 0, 60 -> 1, 50 -> 1 (110), 10 -> 0 (110)
    assert assign_shards([100, 10, 60, 50], 2) == [[0, 1], [2, 3]]
    assert assign_shards([5, 5], 1) == [[0, 1]]
    with pytest.raises(ValueError):
        assign_shards([1], 0)


def test_hogwild_runs_on_one_host_only_and_divides_the_cores():
    assert one_host_problem(["a", "a"]) is None
    problem = one_host_problem(["a", "b", "a"])
    assert "one host" in problem and "2 hosts (a, b)" in problem
    assert threads_per_process(10_000) == 1


def test_parameter_server_options_are_checked():
    parsed = parse_options({"ps_async": {"servers": 2, "max_staleness": 3}}, Where("s.toml"))
    assert resolved(Strategy.PS_ASYNC, parsed) == {"servers": 2, "max_staleness": 3}
    assert resolved(Strategy.PS_SYNC, {}) == {"servers": 1}
    for bad in ({"ps_sync": {"servers": 0}}, {"ps_async": {"max_staleness": -2}}, {"ps_sync": {"max_staleness": 1}}):
        with pytest.raises(UserError):
            parse_options(bad, Where("s.toml"))


def test_the_parameter_servers_links_are_the_bottleneck():
    link = Link(latency_s=1e-5, bandwidth_Bps=1e9)
    net = Network.single(link)
    # 8 workers x 100 MB through one server's 1 GB/s link, each way: 0.8 s, plus a round trip's latency
    assert parameter_server_s(1e8, 8, net) == pytest.approx(2e-5 + 0.8)
    assert parameter_server_s(1e8, 8, net, servers=4) == pytest.approx(2e-5 + 0.2)
    assert parameter_server_s(1e8, 2, net, servers=4) == pytest.approx(2e-5 + 0.1)  # a worker's own link
    p = predict(0.1, 32, 1e8, 8, CommAlgorithm.PARAMETER_SERVER, net, servers=2)
    assert p.comm_time_s == pytest.approx(2e-5 + 0.4) and p.efficiency == pytest.approx(0.1 / (0.1 + 0.4 + 2e-5))


def test_runs_that_cannot_be_placed_are_refused_with_the_reason():
    from harness.experiment.strategies import placement_reason

    assert "one host" in placement_reason(Strategy.HOGWILD_LOCKED, {}, nodes=2, world_size=4)
    assert placement_reason(Strategy.HOGWILD, {}, nodes=1, world_size=4) is None
    assert "2 servers" in placement_reason(Strategy.PS_ASYNC, {"servers": 2, "max_staleness": -1}, 1, 1)
    assert placement_reason(Strategy.PS_SYNC, {"servers": 2}, 1, 2) is None


def test_every_strategy_the_ddp_worker_hands_over_has_a_loop():
    from frameworks.torch_ddp.strategies import async_training, wrapping

    assert set(async_training.PARAMETER_SERVERS + async_training.SHARED_MEMORY) == set(wrapping.WITHOUT_DDP)


def test_numerics_these_loops_do_not_have_are_a_skip_not_ignored():
    from frameworks.torch_ddp.strategies.async_training import numerics_problem
    from harness.contract.axes import Compile, Device, Precision, Size, Storage, Workload
    from harness.contract.spec import RunSpec

    spec = RunSpec("s", "torch_ddp", Workload.DIGITS, Size.SMALL, {}, 1, 2, 16, Strategy.HOGWILD, Storage.SYNTHETIC,
                   0, 0, 10, 60.0, Device.CPU, 0)
    assert numerics_problem(spec) is None
    problem = numerics_problem(RunSpec(**{**spec.__dict__, "precision": Precision.AMP_BF16, "compile": Compile.ON}))
    assert "precision amp_bf16" in problem and "compile on" in problem
