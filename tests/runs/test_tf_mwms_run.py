"""Real TensorFlow MultiWorkerMirroredStrategy runs: real worker processes meeting over gRPC, no mocks.

TensorFlow is imported only in the worker and helper processes, never in the test process.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import pytest

from frameworks.tf_mwms import cluster
from harness.contract.workloads import RESNET50_PARAMS
from harness.experiment import scenario
from harness.running.runner import run_sweep
from tests.helpers import REPO
from tests.helpers.records import rank_events

TF_MISSING = importlib.util.find_spec("tensorflow") is None
needs_tf = pytest.mark.skipif(TF_MISSING, reason="tensorflow is not installed (pip install -e '.[tf]')")
BERT_TINY_PARAMS = 2_075_516  # transformers' BertForPreTraining at the tiny size (torch_ddp's probe says the same)

SCENARIO = """
name = "tf-mwms"
[settings]
warmup_steps = 1
measured_steps = 3
repeats = 1
timeout_s = 240
device = "cpu"
[matrix]
framework = "tf_mwms"
workload = "resnet50"
size = "tiny"
procs_per_node = [1, 2]
batch_per_worker = 2
"""


@needs_tf
def test_resnet_on_one_and_two_workers(write_scenario, tmp_path):
    small = SCENARIO.replace('size = "tiny"', 'size = "small"')  # ResNet-50 at 64x64
    rows = run_sweep(scenario.load(write_scenario(small)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok", "ok"], [r.get("reason") for r in rows]
    for row in rows:
        world = row["world_size"]
        assert row["samples_measured"] == world * 2 * 3
        assert row["weights_consistent"] is True  # every rank's checksum of its trainable variables agrees
        assert row["parameters"] == RESNET50_PARAMS
        assert row["framework_version"].startswith("2.") and json.loads(row["versions"])["keras"].startswith("3.")
        hellos = [next(e for e in rank_events(row, r) if e["event"] == "hello") for r in range(world)]
        assert {h["backend"] for h in hellos} == {"ring"} and {h["dtype_policy"] for h in hellos} == {"float32"}
        assert all(h["intra_op_threads"] >= 1 for h in hellos)
        losses = [next(e for e in rank_events(row, r) if e["event"] == "losses")["values"] for r in range(world)]
        assert all(len(v) == 3 for v in losses)


@needs_tf
def test_bert_on_two_workers_and_horovod_computes_the_same_losses(write_scenario, tmp_path):
    """BERT on 2 workers; where Horovod is installed, horovod_tf runs the same configuration and, as
    both frameworks share model, seed, data and step and differ only in the gradient all-reduce, every
    rank's losses and the final weights agree with tf_mwms's."""
    launcher = "mpirun" if shutil.which("mpirun") else "torchrun"
    with_horovod = importlib.util.find_spec("horovod") is not None and launcher == "mpirun"
    frameworks = '["tf_mwms", "horovod_tf"]' if with_horovod else '"tf_mwms"'
    text = SCENARIO.replace('workload = "resnet50"', 'workload = "bert"').replace(
        'framework = "tf_mwms"', f"framework = {frameworks}").replace(
        "procs_per_node = [1, 2]", f'procs_per_node = 2\nlauncher = "{launcher}"')
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok"] * len(rows), [r.get("reason") for r in rows]
    for row in rows:
        assert row["launcher"] == launcher and row["weights_consistent"] is True
        assert row["parameters"] == BERT_TINY_PARAMS
    if with_horovod:
        mwms, horovod = ([next(e for e in rank_events(row, r) if e["event"] == "losses")["values"]
                          for r in range(2)] for row in rows)
        assert sum(mwms, []) == pytest.approx(sum(horovod, []), rel=1e-5)
        # AdamW hides a gradient off by a constant factor from the losses, not from the weights: with two
        # ranks both all-reduces add the same two numbers (and halve exactly), so the weights are equal
        mwms_end, horovod_end = (next(e for e in rank_events(row, 0) if e["event"] == "end") for row in rows)
        assert mwms_end["weights_checksum"] == horovod_end["weights_checksum"]


@needs_tf
def test_bfloat16_mixed_precision(write_scenario, tmp_path):
    text = SCENARIO.replace('workload = "resnet50"', 'workload = "bert"').replace(
        "procs_per_node = [1, 2]", 'procs_per_node = 1\nprecision = "amp_bf16"')
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    events = rank_events(row, 0)
    assert next(e for e in events if e["event"] == "hello")["dtype_policy"] == "mixed_bfloat16"
    assert row["parameters"] == BERT_TINY_PARAMS  # variables stay float32: same count, same checksum rule
    assert all(v == v for v in next(e for e in events if e["event"] == "losses")["values"])  # finite, not NaN


GRADIENT_CHECK = textwrap.dedent("""
    import numpy as np
    import keras, tensorflow as tf
    from frameworks.shared.keras import training
    from harness.contract.axes import Size, Workload
    from harness.contract.equivalence import recipe
    from harness.contract.workloads import WORKLOADS

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    workload = Workload.RESNET50
    options = WORKLOADS[workload].options(Size.TINY)
    batch = training.synthetic_batch(workload, options, 2, 0, 0)

    def trained(strategy, share):
        with strategy.scope():
            keras.utils.set_random_seed(0)
            model = training.build_model(workload, options)
            optimization = training.optimization_from_recipe(recipe(workload, 2))
            optimization.optimizer.build(model.trainable_variables)
        weights = lambda: [keras.ops.convert_to_numpy(v.value) for v in model.trainable_variables]
        initial = weights()
        step = training.build_train_step(workload, model, optimization, training.GradientExchange(share=share))
        tf.function(lambda: strategy.run(step, args=(batch,)))()
        return initial, weights()

    def difference(a, b):
        return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))

    initial, single = trained(tf.distribute.get_strategy(), 1.0)
    _, pair = trained(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), 0.5)
    print(difference(single, pair), difference(single, initial))
""")


@needs_tf
def test_two_replicas_on_the_same_batch_step_like_one():
    """The worker's gradient share (1/replicas, L2 term included) against Keras's summing optimizer:
    two replicas fed the same batch must update the weights exactly as one process does. Without the
    share (1.0) the first SGD step's update is doubled, so it would miss by the update itself, which
    must therefore be well above the tolerance. Same step builder and optimizer as the workers."""
    done = subprocess.run([sys.executable, "-c", GRADIENT_CHECK], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-3000:]
    shared, update = map(float, done.stdout.split()[-2:])
    assert shared < 1e-6
    assert update > 1e-3


def test_cluster_rendezvous_gives_every_worker_the_same_list(tmp_path):
    configs = {}

    def worker(rank):
        configs[rank] = cluster.tf_config(tmp_path, rank, 3, single_host=True, env={}, timeout_s=30)

    threads = [threading.Thread(target=worker, args=(r,)) for r in (2, 0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lists = {tuple(c["cluster"]["worker"]) for c in configs.values()}
    assert len(lists) == 1
    (workers,) = lists
    assert len(set(workers)) == 3 and all(w.startswith("127.0.0.1:") for w in workers)
    assert [configs[r]["task"] for r in range(3)] == [{"type": "worker", "index": r} for r in range(3)]


def test_parameter_server_roles_come_from_the_ranks(tmp_path):
    roles = cluster.parameter_server_roles(5, servers=2)
    assert roles == ["chief", "ps", "ps", "worker", "worker"]
    with pytest.raises(ValueError, match="at least 4 processes"):
        cluster.parameter_server_roles(3, servers=2)
    for rank in range(5):  # the others have published already: each call meets them at once
        cluster.publish(tmp_path / cluster.FOLDER, rank, f"127.0.0.1:{2000 + rank}")
    config = cluster.tf_config(tmp_path, 4, 5, single_host=True, env={}, timeout_s=5, roles=roles)
    # the rank's own entry is a fresh free port; the others' are as published, in rank order per job
    assert config["cluster"]["chief"] == ["127.0.0.1:2000"]
    assert config["cluster"]["ps"] == ["127.0.0.1:2001", "127.0.0.1:2002"]
    assert config["cluster"]["worker"][0] == "127.0.0.1:2003" and len(config["cluster"]["worker"]) == 2
    assert config["task"] == {"type": "worker", "index": 1}


def test_cluster_rendezvous_names_the_missing_ranks(tmp_path):
    cluster.publish(tmp_path / cluster.FOLDER, 0, "127.0.0.1:1234")
    with pytest.raises(TimeoutError, match=r"rank\(s\) \[1, 2\] of 3"):
        cluster.gather(tmp_path / cluster.FOLDER, 3, timeout_s=0.2)


def test_own_address_is_the_route_to_the_first_host():
    assert cluster.own_address(True, {"MASTER_ADDR": "10.1.2.3"}) == "127.0.0.1"
    assert cluster.own_address(False, {"MASTER_ADDR": "127.0.0.1"}) == "127.0.0.1"


def test_kubernetes_runs_it_as_a_tfjob_with_a_pod_per_rank(write_scenario, tmp_path):
    """On Kubernetes the Training Operator hands each pod its TF_CONFIG (the worker then skips its own
    rendezvous); the dry run writes the manifest without a cluster."""
    import yaml

    from harness.running.runner import dry_run

    text = SCENARIO.replace("procs_per_node = [1, 2]", 'procs_per_node = 2\nlauncher = "kubernetes"')
    ((spec, run_dir, reason),) = dry_run(scenario.load(write_scenario(text)), tmp_path)
    job = yaml.safe_load((run_dir / "job.yaml").read_text())
    assert job["kind"] == "TFJob" and job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 2
    container = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["command"][-2:] == ["frameworks.tf_mwms.worker", str(run_dir / "spec.json")]


@pytest.fixture
def own_two_hosts():
    """Two network-namespace hosts of this test's own (tf-h0, tf-h1), so other sessions' hosts are untouched."""
    if os.geteuid() != 0 or not all(shutil.which(tool) for tool in ("ip", "tc", "mpirun")):
        pytest.skip("network-namespace hosts need root, iproute2 (ip, tc) and mpirun")
    tool, env = REPO / "tools" / "netns_hosts.sh", {**os.environ, "ROSETTA_NETNS_PREFIX": "tf"}
    started = subprocess.run([str(tool), "start", "2"], capture_output=True, text=True, env=env)
    if started.returncode != 0:
        pytest.skip(f"cannot make network namespaces here: {started.stderr.strip()[-300:]}")
    yield dict(line.split("=", 1) for line in started.stdout.split())
    subprocess.run([str(tool), "stop"], env=env, check=False)


@needs_tf
def test_two_hosts_each_worker_advertises_its_own_address(own_two_hosts, write_scenario, tmp_path):
    hosts = list(own_two_hosts)
    matrix = 'nodes = 2\nprocs_per_node = 1\nlauncher = "mpirun"\nnetwork = "1gbit"'
    text = SCENARIO.replace("procs_per_node = [1, 2]", matrix) + textwrap.dedent(f"""
        [launcher_options.mpirun]
        hosts = {json.dumps(hosts)}
        addresses = {json.dumps([own_two_hosts[h] for h in hosts])}
        remote = "netns"
        """)
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert json.loads(row["hosts"]) == hosts and row["weights_consistent"] is True
    run_dir = tmp_path / "results" / "runs" / row["sweep_id"] / row["run_id"].split("/")[1]
    published = [(run_dir / cluster.FOLDER / f"worker{r}").read_text().split(":")[0] for r in range(2)]
    assert published == [own_two_hosts[h] for h in hosts]  # not loopback: the address the other host reaches
