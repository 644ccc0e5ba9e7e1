"""The emulated GPU cluster: emulated accelerators whose real gradients cross shaped, time-dilated links
(harness/machines/emulated_cluster.py, frameworks/shared/pytorch/emulated_gradients.py)."""

import dataclasses
import json
import shutil
import sys
import time

import pytest

from harness.base.errors import UserError
from harness.contract.axes import Device, Storage, Strategy, Workload
from harness.experiment import matrix, scenario
from harness.launchers import hosts
from harness.machines import emulated_cluster
from tests.helpers.emulated_scenarios import scenario_text, skip_without
from tests.helpers.records import assert_compute_attributed


def test_links_are_the_interconnect_presets_and_an_unknown_one_is_one_line():
    ten = emulated_cluster.link("10GbE")
    assert (ten.bandwidth_Bps, ten.latency_s) == (1.1e9, pytest.approx(25e-6))
    with pytest.raises(UserError, match=r"unknown link 'Token-Ring'; known: 10GbE, 25GbE"):
        emulated_cluster.link("Token-Ring")


def test_tbf_caps_each_interface_at_the_dilated_rate():
    argv = emulated_cluster.tbf_argv("lo", emulated_cluster.link("PCIe3"), dilation=20, share=4)
    rate = argv[argv.index("rate") + 1]
    assert argv[:6] == ("tc", "qdisc", "replace", "dev", "lo", "root") and rate == f"{int(10e9 * 8 * 4 / 20)}bit"
    assert int(argv[argv.index("burst") + 1]) >= 256 * 1024  # above loopback's 64 KiB packets


def test_auto_dilation_grows_with_the_ranks_exchange_and_stays_a_capped_power_of_two():
    grad = 4 * 25_557_032
    one = emulated_cluster.auto_dilation(1, grad, 0.0, 0.193, cores=2)
    four = emulated_cluster.auto_dilation(4, grad, 0.015, 0.193, cores=2)
    sixteen = emulated_cluster.auto_dilation(16, grad, 0.174, 0.193, cores=2)
    assert emulated_cluster.MIN_DILATION <= one <= four < sixteen <= emulated_cluster.MAX_DILATION
    assert all(k == 2 ** round(__import__("math").log2(k)) for k in (one, four, sixteen))
    assert emulated_cluster.auto_dilation(4096, grad, 1e-6, 1e-6, cores=1) == emulated_cluster.MAX_DILATION


def test_a_costlier_exchange_gets_a_larger_dilation():
    """TensorFlow's RING over gRPC costs this CPU about 4x gloo's a byte: auto's k for 8 P100 ranks grows."""
    grad = 4 * 25_557_032
    gloo = emulated_cluster.auto_dilation(8, grad, 0.0015, 0.2922, cores=2)
    grpc = emulated_cluster.auto_dilation(8, grad, 0.0015, 0.2922, cores=2, exchange_cpu_cost=4.0)
    assert (gloo, grpc) == (64.0, 256.0)


def test_an_exchange_this_cpu_held_back_saturates_the_row_when_it_is_a_visible_part_of_the_step():
    from harness.running.emulation_fields import cluster_fields

    def record(exchange_s, exchange_cpu_busy, host_cpu_busy=0.16, link_exchange_s=0.0015):
        return {"exchange": "gradients", "dilation": 64.0, "compute_s": 0.2922, "intra_link": "NVLink",
                "inter_link": "", "late_s": 0.0, "host_cpu_busy": host_cpu_busy, "exchange_s": exchange_s,
                "exchange_cpu_busy": exchange_cpu_busy, "link_exchange_s": link_exchange_s}

    step = 0.2922 * 64  # dilated (s)
    held_back = cluster_fields([record(step / 10, 0.99)])  # tf-docs-dgx1 at k = 64: 1.8 s of 18.7 s, NVLink's 0.1 s
    assert held_back["emulation_saturated"] and held_back["exchange_s"] == pytest.approx(0.2922 / 10)
    assert not cluster_fields([record(step / 40, 0.99)])["emulation_saturated"]  # busy, but a 40th of the step
    assert not cluster_fields([record(step / 10, 0.30)])["emulation_saturated"]  # long, the CPU mostly idle
    # Open MPI's ranks poll (busy) while a slow link takes its own time: not this machine's doing
    assert not cluster_fields([record(step / 10, 0.99, link_exchange_s=0.2922 / 10)])["emulation_saturated"]
    assert not cluster_fields([record(None, None)])["emulation_saturated"]  # DDP: its exchange is in the backward
    assert cluster_fields([record(None, None, host_cpu_busy=0.8)])["emulation_saturated"]


def test_a_scenario_resolves_the_cluster_and_the_hosts_get_their_links(write_scenario):
    specs = matrix.expand(scenario.load(write_scenario(scenario_text())))
    [spec] = specs
    assert spec.emulation["exchange"] == "gradients" and spec.emulation["dilation"] == 8.0
    assert (spec.emulation["intra_link"], spec.emulation["inter_link"]) == ("PCIe3", "10GbE")
    commands = hosts.shaping(spec, ("h0", "h1", "h2"), hosts.RemoteShell.NETNS, "eth0")
    assert len(commands) == 8  # two hosts used, two interfaces, the delay line and TCP's settings each
    assert commands[0][:4] == ("ip", "netns", "exec", "h0") and "eth0" in commands[0] and "tbf" in commands[0]
    assert "lo" in commands[1] and f"{int(10e9 * 8 * 2 / 8)}bit" in commands[1]
    # each packet arriving at a host waits its link's latency x k: 10GbE's 25 us and PCIe3's 5 us, at k = 8
    assert commands[2][-4:] == ("harness.base.delay_line", "start", "eth0:0.000200000", "lo:0.000040000")
    # TCP that does not pace at the dilated rate, in 10GbE's undilated 64 KiB packets (46 segments of 1,448 bytes)
    assert commands[3][4:6] == ("sh", "-c") and "echo 46 > /proc/sys/net/ipv4/tcp_min_tso_segs" in commands[3][-1]
    auto = matrix.expand(scenario.load(write_scenario(scenario_text(emulation=""))))[0]
    assert auto.emulation["dilation_auto"] and auto.emulation["dilation"] >= 2


def test_one_host_of_one_gpu_leaves_both_interfaces_unshaped(write_scenario):
    [spec] = matrix.expand(scenario.load(write_scenario(scenario_text(nodes=1, procs=1))))
    commands = hosts.shaping(spec, ("h0",), hosts.RemoteShell.NETNS, "eth0")
    assert [c[-3:] for c in commands[:2]] == [("pfifo", "limit", "1000")] * 2
    assert commands[2][-1] == "start"  # no delays: an earlier run's delay line removed


def test_bad_cluster_settings_are_one_line_errors(write_scenario):
    with pytest.raises(UserError, match=r"\[emulation\] accelerator: .*unknown link 'NVLink9'"):
        scenario.load(write_scenario(scenario_text().replace('"PCIe3"', '"NVLink9"')))
    with pytest.raises(UserError, match=r'update_share and input_workers need exchange = "gradients"'):
        scenario.load(write_scenario(scenario_text().replace('exchange = "gradients"', "")))
    with pytest.raises(UserError, match=r"\[emulation\] exchange"):
        scenario.load(write_scenario(scenario_text().replace('"gradients"', '"pigeons"')))
    [spec] = matrix.expand(scenario.load(write_scenario(scenario_text())))
    assert "network-namespace hosts" in hosts.check(spec, ("h0", "h1"), (), hosts.RemoteShell.SSH, "torchrun")


def test_which_strategies_exchange_real_gradients_is_declared_per_framework():
    import frameworks

    gradients = {"exchange": "gradients"}
    ddp = frameworks.get("torch_ddp")
    assert ddp.unsupported_exchange(Strategy.ONEBIT, gradients) is None
    assert ddp.unsupported_exchange(Strategy.PS_SYNC, gradients) is None
    assert ddp.unsupported_exchange(Strategy.PS_ASYNC, gradients) is None
    assert ddp.unsupported_exchange(Strategy.FSDP, gradients) is None  # its collectives wrap the emulated layers
    assert "not tensor_parallel" in ddp.unsupported_exchange(Strategy.TENSOR_PARALLEL, gradients)
    assert ddp.unsupported_exchange(Strategy.FSDP, {"exchange": "barrier"}) is None
    for name in frameworks.names():  # every framework's allreduce, each through its own machinery
        info = frameworks.get(name)
        if Device.EMULATED not in info.devices:  # none emulated yet (jax): said so, not run
            assert "has no emulated accelerators" in info.unsupported_exchange(Strategy.ALLREDUCE, gradients)
            continue
        assert info.unsupported_exchange(Strategy.ALLREDUCE, gradients) is None
    assert "allreduce only, not ps_async" in frameworks.get("tf_mwms").unsupported_exchange(Strategy.PS_ASYNC,
                                                                                              gradients)
    none = dataclasses.replace(frameworks.get("chainer"), emulated_exchanges=())
    assert "no emulated accelerators with real gradients" in none.unsupported_exchange(Strategy.ALLREDUCE, gradients)
    assert ddp.unsupported_reason(Workload.RESNET50, Strategy.ALLREDUCE, Storage.SYNTHETIC, None,
                                  Device.EMULATED) is None


class _Spec:
    def __init__(self, size="tiny", compute_s=0.06, dilation=2.0, update_share=0.0):
        from harness.contract.axes import Size
        from harness.contract.workloads import WORKLOADS

        self.workload, self.workload_options = Workload.RESNET50, WORKLOADS[Workload.RESNET50].options(Size(size))
        self.emulation = {"compute_s": compute_s, "dilation": dilation, "update_share": update_share}
        self.seed = 0


def test_the_layers_share_the_step_by_their_own_flops():
    pytest.importorskip("torch")
    from frameworks.shared.pytorch import emulated_gradients

    shares = emulated_gradients.layer_shares(_Spec(size="full"))
    assert len(shares) == 107 and sum(shares) == pytest.approx(1.0)  # 53 convolutions, 53 norms, the classifier
    assert shares[0] > 0.02 and shares[1] < 1e-3  # the stem's 7x7 convolution, then its BatchNorm


def test_keras_variables_share_the_step_by_their_layers_flops():
    """horovod_tf's emulated step times the Keras variables: each kernel its layer's FLOPs (model_flops'
    records matched by shape, in the order Keras made them), BERT's tied MLM decoder at its bias, norms and
    embeddings nothing; a layer no variable holds is an error."""
    pytest.importorskip("tensorflow")
    from frameworks.shared.keras import training
    from harness.contract.axes import Size
    from harness.contract.equivalence import layer_flops
    from harness.contract.workloads import WORKLOADS
    from harness.machines import model_flops

    made = {}
    for workload in (Workload.RESNET50, Workload.BERT, Workload.LLAMA):
        options = WORKLOADS[workload].options(Size.TINY)
        variables = training.build_model(workload, options).trainable_variables
        shapes = made[workload] = [tuple(v.shape) for v in variables]
        shares = model_flops.shares_by_shape(workload, options, shapes)
        records = [r for r in model_flops.forward_layers(workload, options) if r["op"] != "attention"]
        weights = sum(layer_flops(r) for r in records)
        assert sum(shares) == pytest.approx(1.0) and sum(s > 0 for s in shares) == len(records), workload
        if workload == Workload.RESNET50:  # the Keras ResNet makes its kernels in the forward's order
            kernels = [s for s, shape in zip(shares, shapes) if len(shape) > 1]
            assert kernels == pytest.approx([layer_flops(r) / weights for r in records])
        else:  # the LM head or tied decoder, the largest layer of the tiny models, where its weight is
            head = next(r for r in reversed(records) if r["out_features"] == options["vocab_size"])
            at = shapes.index((options["vocab_size"],) if workload == Workload.BERT else
                              (options["hidden_size"], options["vocab_size"]))
            assert shares[at] == pytest.approx(layer_flops(head) / weights) and shares[at] == max(shares)
    without_nsp = made[Workload.BERT][:-2]  # the next-sentence head's kernel and bias left out
    with pytest.raises(ValueError, match=r"no variable of the model holds model_flops' layer \(64, 2\)"):
        model_flops.shares_by_shape(Workload.BERT, WORKLOADS[Workload.BERT].options(Size.TINY), without_nsp)


def test_each_gradient_arrives_when_its_layer_backward_would_end():
    """The emulated step lasts k x the profile; the classifier's gradient comes first, the stem's last."""
    torch = pytest.importorskip("torch")
    from frameworks.shared.pytorch import emulated_gradients

    model = emulated_gradients.build(_Spec(compute_s=0.06, dilation=2.0), 0)
    params = list(model.parameters())
    seen: dict[int, float] = {}

    def noted(index):
        def hook(_) -> None:
            seen.setdefault(index, time.perf_counter())
        return hook

    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(noted(i))
    start = time.perf_counter()
    out = model(torch.zeros(3))  # inputs are ignored
    forward_done = time.perf_counter()
    out.backward()
    end = time.perf_counter()
    order = sorted(seen, key=seen.get)
    assert len(seen) == len(params) and all(p.grad is not None and p.grad.shape == p.shape for p in params)
    assert order[0] in (len(params) - 1, len(params) - 2) and order[-1] == 0  # fc first, the stem's weight last
    # the passes wait for deadlines: never shorter than the profile x k (a third forward), however loaded
    assert forward_done - start >= 0.04 - 1e-3 and end - start >= 0.12 - 1e-3
    assert end - start < 1.0  # and not far beyond it (generous: this machine is shared)



def test_horovods_own_clocks_are_dilated_with_the_step():
    """Horovod's cycle time and its Gloo timeout last k times theirs (a user's own value too), so that a
    dilated ring step of 32 ranks is not taken for a dead peer after 30 s."""
    from frameworks.shared import emulated_clock

    assert emulated_clock.horovod_environment({"dilation": 64.0}, {}) == {
        "HOROVOD_CYCLE_TIME": "64", "HOROVOD_GLOO_TIMEOUT_SECONDS": "1920"}
    given = {"HOROVOD_CYCLE_TIME": "5", "HOROVOD_GLOO_TIMEOUT_SECONDS": "60"}
    assert emulated_clock.horovod_environment({"dilation": 2.0}, given) == {
        "HOROVOD_CYCLE_TIME": "10", "HOROVOD_GLOO_TIMEOUT_SECONDS": "120"}


def test_the_update_share_waits_after_the_backward_instead_of_in_it():
    """An update's share of the step is not spent in the backward, where the exchange would overlap it."""
    torch = pytest.importorskip("torch")
    from frameworks.shared.pytorch import emulated_gradients

    model = emulated_gradients.build(_Spec(compute_s=0.1, dilation=2.0, update_share=0.5), 0)
    start = time.perf_counter()
    model(torch.zeros(1)).backward()
    passes = time.perf_counter()
    model.update()
    end = time.perf_counter()
    assert passes - start >= 0.1 - 1e-3 and end - passes >= 0.1 - 1e-3  # half of 0.2 s dilated each
    # the passes aim at half the step (a third of it the forward), the update at the other half
    passes_s = model.clock.forward_clock.offsets[-1] + model.clock.backward_clock.offsets[-1]
    assert passes_s == pytest.approx(0.1) and model.clock.forward_clock.offsets[-1] == pytest.approx(0.1 / 3)
    assert model.clock.update_clock.offsets == [pytest.approx(0.1)]
    plain = emulated_gradients.build(_Spec(compute_s=0.1, dilation=2.0), 0)
    start = time.perf_counter()
    plain.update()  # no share: returns at once
    assert time.perf_counter() - start < 0.05


@pytest.mark.parametrize("framework, launcher", [("torch_ddp", "torchrun"), ("horovod_torch", "horovodrun")])
def test_sixteen_emulated_gpus_on_four_hosts_exchange_real_gradients(four_hosts, write_scenario, tmp_path,
                                                                     framework, launcher):
    """4 hosts x 4 emulated GPUs (ResNet-50's 25.6 M parameters at its tiny size), two steps: every rank's
    gradient crosses the shaped links, the row is in the emulated cluster's time (divided by k), says k
    and whether this machine kept up, and the links carried the bytes."""
    pytest.importorskip("horovod.torch") if framework == "horovod_torch" else pytest.importorskip("torch")
    import subprocess

    from harness.running.runner import run_sweep

    names, addresses = list(four_hosts), list(four_hosts.values())
    text = scenario_text(framework=framework, launcher=launcher, nodes=4, procs=4, size="tiny",
                         emulation="dilation = 16", names=names, addresses=addresses)
    [row] = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row.get("reason")
    assert (row["world_size"], row["exchange"], row["dilation"]) == (16, "gradients", 16.0)
    assert (row["intra_link"], row["inter_link"]) == ("PCIe3", "10GbE")
    assert row["step_variation"] == "h100-resnet50-fp32-contiguous"  # the V100 profile's lent spread
    # the step is at least the V100's profiled 0.193 s in the cluster's time, and the exchange adds to it
    assert row["step_time_p50_s"] >= 0.19 and row["throughput"] <= 16 * 64 / 0.19
    assert row["weights_consistent"]  # every rank's parameters alike at the end
    assert isinstance(row["emulation_saturated"], bool) and 0 <= row["host_cpu_busy"] <= 1
    sent = subprocess.run(["ip", "netns", "exec", names[0], "tc", "-s", "qdisc", "show", "dev", "eth0"],
                          capture_output=True, text=True).stdout
    assert "tbf" in sent and int(sent.split("Sent ")[1].split(" bytes")[0]) > 4 * 25_557_032  # a gradient's worth
    if framework == "horovod_torch":  # its worker timed its passes, where DDP's reducer times torch_ddp's
        assert_compute_attributed(row)


@pytest.mark.parametrize("framework, launcher", [("tf_mwms", "torchrun"), ("chainer", "mpirun")])
def test_frameworks_that_exchange_after_the_backward_take_emulated_gradients(four_hosts, write_scenario, tmp_path,
                                                                            framework, launcher):
    """2 hosts x 2 emulated GPUs of a framework whose step exchanges all gradients after the backward:
    MultiWorkerMirroredStrategy's RING all-reduce of ResNet-50's gradients in one pack (as Keras's optimizer
    hands them over), ChainerMN's MPI allreduces (as its multi-node optimizer's update makes them), across
    the shaped links after the timed passes; the step is the profile's and the exchange's, one after the
    other. Each worker checks that the exchange summed every rank's gradient."""
    skip_without(framework, launcher)
    import subprocess

    from harness.running.runner import run_sweep

    names = list(four_hosts)[:2]
    text = scenario_text(framework=framework, launcher=launcher, nodes=2, procs=2, size="tiny",
                         emulation="dilation = 16", names=names, addresses=[four_hosts[n] for n in names])
    [row] = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row.get("reason")
    assert (row["framework"], row["exchange"], row["world_size"], row["dilation"]) == (framework, "gradients", 4, 16.0)
    assert row["step_time_p50_s"] >= 0.19  # at least the V100's profiled step in the cluster's time
    assert row["weights_consistent"]  # the broadcast initial values, alike on every worker
    # every step's exchange crossed the links: at least half a ring allreduce's time over 10GbE (0.139 s;
    # measured 0.15-0.16 s), not a constant folded once (which horovod_tf's was, until its gradients came
    # out of the sleeps)
    assert row["exchange_s"] > 0.5 * 0.139, row["exchange_s"]
    sent = subprocess.run(["ip", "netns", "exec", names[0], "tc", "-s", "qdisc", "show", "dev", "eth0"],
                          capture_output=True, text=True).stdout
    assert int(sent.split("Sent ")[1].split(" bytes")[0]) > 4 * 25_557_032  # more than a gradient (102 MB)
    if framework == "chainer":  # its worker timed its passes and the exchange's wait after them
        assert_compute_attributed(row)


def test_horovod_tensorflow_allreduces_each_gradient_as_its_layer_backward_ends(four_hosts, write_scenario, tmp_path):
    """horovod_tf on 2 hosts x 2 emulated GPUs through horovodrun: the tf.function's timed layers hand
    DistributedGradientTape each gradient at its backward time, and Horovod's allreduces cross the shaped
    links while the rest of the backward sleeps, so the step is shorter than the profile plus a whole
    exchange (tf_mwms's, measured beside it in the same configuration: 0.35 s)."""
    skip_without("horovod_tf", "horovodrun")
    import subprocess

    from harness.running.runner import run_sweep

    names = list(four_hosts)[:2]
    text = scenario_text(framework="horovod_tf", launcher="horovodrun", nodes=2, procs=2, size="tiny",
                         emulation="dilation = 16", names=names)
    [row] = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row.get("reason")
    assert (row["framework"], row["exchange"], row["world_size"]) == ("horovod_tf", "gradients", 4)
    # the V100's 0.193 s and what of the ring over 10GbE (0.139 s) the backward (0.129 s) cannot hide
    # (measured 0.221 s, horovod_torch's 0.222): more than the profile, less than the two one after the other
    assert 0.2 <= row["step_time_p50_s"] < 0.193 + 0.139
    assert row["weights_consistent"]
    sent = subprocess.run(["ip", "netns", "exec", names[0], "tc", "-s", "qdisc", "show", "dev", "eth0"],
                          capture_output=True, text=True).stdout
    # rank 0's weights once, then a gradient's ring (1.5 x 102 MB from a host, measured 160 MB) each of the 3 steps
    assert int(sent.split("Sent ")[1].split(" bytes")[0]) > 4 * 4 * 25_557_032


@pytest.mark.parametrize("workload", ["bert", "llama"])
def test_horovod_tensorflow_times_the_transformers_layers_too(four_hosts, write_scenario, tmp_path, workload):
    """horovod_tf's emulated BERT and Llama (tiny) on 2 hosts x 2 GPUs, a 0.1 s step given outright: every
    variable is timed by its layer's FLOPs (BERT's tied decoder at its bias) and its gradient averaged
    across the shaped links (each worker checks every rank's arrived). BERT's word embeddings (7.8 MB
    of gradient) are the last made and the first used: their allreduce, 9.4 ms over 10GbE, is not hidden
    (measured 0.1133 s; Llama's 1.2 MB, 0.1020 s)."""
    skip_without("horovod_tf", "horovodrun")
    from harness.running.runner import run_sweep

    names = list(four_hosts)[:2]
    text = scenario_text(framework="horovod_tf", launcher="horovodrun", nodes=2, procs=2, size="tiny",
                         emulation="dilation = 16\ncompute_s = 0.1", names=names)
    text = text.replace('workload = "resnet50"', f'workload = "{workload}"').replace("batch_per_worker = 64",
                                                                                    "batch_per_worker = 8")
    [row] = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row.get("reason")
    assert (row["workload"], row["exchange"], row["world_size"]) == (workload, "gradients", 4)
    assert row["step_time_p50_s"] >= (0.1 + 0.0094 / 2 if workload == "bert" else 0.1)
    assert row["weights_consistent"]


@pytest.mark.parametrize("strategy", ["ps_sync", "ps_async"])
def test_parameter_servers_take_emulated_gradients_over_the_shaped_links(four_hosts, write_scenario, tmp_path,
                                                                         strategy):
    """ps_sync and Downpour's ps_async on 2 hosts x 2 emulated GPUs, a server on each host: the workers push
    their emulated gradients to both servers and pull the update through TensorPipe's TCP, which the links
    shape (an asynchronous server applies each push as it comes: the staleness is the run's own)."""
    pytest.importorskip("torch")
    from harness.running.runner import run_sweep

    names = list(four_hosts)[:2]
    text = scenario_text(nodes=2, procs=2, size="tiny", emulation="dilation = 16", names=names,
                         addresses=[four_hosts[n] for n in names],
                         extra=f'strategy = "{strategy}"\n[strategy_options.{strategy}]\nservers = 2')
    [row] = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row.get("reason")
    assert (row["strategy"], row["exchange"], row["world_size"]) == (strategy, "gradients", 4)
    assert row["step_time_p50_s"] >= 0.19  # at least the V100's profiled step in the cluster's time
    assert row["weights_consistent"]  # every worker loaded the servers' same final tensors
    assert row["server_bytes_in_per_step"] > 4 * 25_557_032  # a server took its half of 4 workers' gradients a step


def test_each_hosts_links_latency_is_held_and_its_cpu_is_the_runs(four_hosts, write_scenario, tmp_path):
    """2 hosts x 1 emulated GPU over TCP-cloud-2018 (50 us) at k = 32: each host's delay line holds what
    arrives through its network card for 1.6 ms; the gradients passed through it, and its CPU is counted as
    the run's own (by the host's GPU 0), not as other load on the machine."""
    pytest.importorskip("torch")
    if shutil.which("iptables") is None:
        pytest.skip("the links' delay lines need iptables (tools/system-packages.txt)")
    import subprocess

    from harness.running.runner import run_sweep

    names = list(four_hosts)[:2]
    text = scenario_text(nodes=2, procs=1, size="tiny", emulation="dilation = 32\ncompute_s = 0.05", names=names,
                         addresses=[four_hosts[n] for n in names]).replace('"10GbE"', '"TCP-cloud-2018"')
    [row] = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row.get("reason")
    for name in names:  # the line stays until the host's next run or its removal
        queue = subprocess.run(["ip", "netns", "exec", name, "cat", "/proc/net/netfilter/nfnetlink_queue"],
                               capture_output=True, text=True).stdout.split()
        assert queue[0] == "7100" and int(queue[7]) > 1000  # its queue, and the packets it let in
    # the line's CPU is the run's: the sampler of a host's GPU 0 counts it in the run's own process tree
    ask = ("import os; from harness.base import delay_line; from harness.contract import telemetry; "
           "print([p.pid for p in telemetry.Sampler(os.getpid(), 0).apparatus] == [delay_line.running()], "
           "telemetry.Sampler(os.getpid(), 1).apparatus)")
    counted = subprocess.run(["ip", "netns", "exec", names[1], sys.executable, "-c", ask], capture_output=True,
                             text=True)
    assert counted.stdout.split() == ["True", "[]"], counted.stderr[-300:]


def test_reproduce_at_emulated_covers_references_and_says_each_points_error(monkeypatch):
    """What --at emulated covers is data (a reference's accelerator and links, the frameworks' declared
    exchanges); its report gives each point's error beside the scaling model's on the same points."""
    import pandas as pd

    import frameworks
    from harness.reproduction import emulated_plan, reference
    from harness.reproduction import emulated_reproduction as emulated
    from harness.reproduction.prediction import predicted_rows

    batchai = reference.get("batchai-torch-v100")
    assert emulated.coverage(batchai) is None and emulated.emulated_here(batchai).startswith("yes: 5 points")
    assert emulated.coverage(reference.get("batchai-tf-p100-p40-k80")) is None  # a profile per series' GPU model
    assert emulated.coverage(reference.get("tf-docs-dgx1")) is None  # tf_mwms, its P100 profile
    tf_rank, ddp_rank = emulated.rank_bytes(reference.get("tf-docs-dgx1")), emulated.rank_bytes(batchai)
    assert tf_rank - ddp_rank == (frameworks.get("tf_mwms").emulated_rank_base_bytes
                                  - frameworks.get("torch_ddp").emulated_rank_base_bytes)  # TensorFlow's runtime
    from rich.console import Console

    from harness.reproduction import reference_list

    monkeypatch.setattr(reference_list, "emulated_here", lambda ref: "no: no [published] accelerator")
    console = Console(width=400, record=True)
    console.print(reference_list.references_table())
    assert "no [published] accelerator" in console.export_text()  # the section's name, not taken for markup
    monkeypatch.undo()
    monkeypatch.setattr(emulated_plan, "usable_bytes", lambda available=None: 16.5 * emulated.rank_bytes(batchai))
    assert "horovod_torch's points of 32 GPUs and more skipped" in emulated.emulated_here(batchai)  # no reductions
    full, reduced = emulated.emulated_scenarios(batchai, {"h0": "10.0.0.1", "h1": "10.0.0.2"}, framework="torch_ddp")
    assert (reduced.emulation.gpus_per_rank, reduced.emulation.gradient_scale) == (4, 32)  # torch_ddp: 32 reduced
    scenario_ = full
    assert scenario_.emulation.exchange.value == "gradients" and scenario_.emulation.inter_link == "TCP-cloud-2018"
    rows = pd.DataFrame([{"device": "emulated", "status": "ok", "framework": "torch_ddp", "batch_per_worker": 64,
                          "precision": "fp32", "world_size": n, "throughput": tp, "dilation": 32.0,
                          "emulation_saturated": n == 16} for n, tp in ((1, 330.0), (4, 1254.0), (8, 1188.0),
                                                                         (16, 2112.0))])
    lines = emulated.error_lines(batchai, rows, predicted_rows(batchai))
    assert lines[0].startswith("Emulated (torch_ddp; steps exact) vs published")  # rows from before step_variation
    varied = emulated.error_lines(batchai, rows.assign(step_variation="h100-resnet50-fp32-contiguous"),
                                  predicted_rows(batchai))
    assert varied[0].startswith("Emulated (torch_ddp; steps varied as h100-resnet50-fp32-contiguous) vs published")
    assert "95% vs 94% at 4 (+1.0 pp, k 32)" in lines[0] and "45% vs 45% at 8" in lines[0]
    assert "40% vs 40% at 16 (-0.1 pp, k 32, emulation saturated: not a prediction)" in lines[0]
    assert lines[1].startswith("Emulated cluster's mean absolute error: 0.") and "scaling model's on the same points" in lines[1]
    assert emulated.error_lines(batchai, rows.assign(device="cpu"), predicted_rows(batchai)) == []
    # with the runs' steps, each point's efficiency carries the 95% interval of resampling them
    steps = {1: [0.19, 0.2, 0.21, 0.2], 4: [0.2, 0.21, 0.22, 0.21], 8: [0.4, 0.45, 0.44, 0.41], 16: [0.5] * 4}
    timed = rows.assign(step_times_s=[json.dumps(steps[n]) for n in rows["world_size"]])
    with_spread = emulated.error_lines(batchai, timed, predicted_rows(batchai))
    low, high = emulated.efficiency_interval(timed, 1, 8)
    assert 0.2 / 0.45 <= low < 0.2 / 0.425 < high <= 0.2 / 0.4  # the mean steps' ratio, resampled
    assert f"45% ({low:.0%}-{high:.0%}) vs 45% at 8" in with_spread[0] and "95% intervals" in with_spread[1]
    assert emulated.efficiency_interval(rows, 1, 8) is None  # no steps kept: no interval shown
