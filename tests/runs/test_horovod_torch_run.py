"""Real Horovod PyTorch runs through the harness: horovodrun (Gloo and MPI controllers) and mpirun start
real processes that allreduce through Horovod; nothing is mocked. Skipped where Horovod is not
installed (tools/install_horovod.py, run by make's environment step)."""

import importlib.util
import shutil

import pytest

if importlib.util.find_spec("horovod") is None:
    pytest.skip("horovod is not installed here (run tools/install_horovod.py in this environment)",
                allow_module_level=True)

from harness.experiment import scenario  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402
from tests.helpers.records import assert_compute_attributed  # noqa: E402

SCENARIO = """
name = "horovod"
[settings]
warmup_steps = 1
measured_steps = 2
repeats = 1
timeout_s = 240
device = "cpu"
[matrix]
framework = "horovod_torch"
workload = "resnet50"
size = "tiny"
procs_per_node = [1, 2]
batch_per_worker = 2
launcher = "{launcher}"
"""

needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (Open MPI) not installed")


def _run(write_scenario, tmp_path, launcher, options=""):
    text = SCENARIO.format(launcher=launcher).replace('size = "tiny"', 'size = "small"') + options  # 64x64
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok", "ok"], [r.get("reason") for r in rows]
    for row in rows:
        assert row["world_size"] == [1, 2][rows.index(row)]
        assert row["weights_consistent"] is True
        assert row["parameters"] == 25_557_032
        assert row["framework_version"] == "0.28.1" and row["launcher"] == launcher
        assert row["samples_measured"] == row["world_size"] * 2 * 2
    return rows


@pytest.mark.parametrize("controller", ["gloo", pytest.param("mpi", marks=needs_mpirun)])
def test_horovodrun_one_and_two_processes(write_scenario, tmp_path, controller):
    rows = _run(write_scenario, tmp_path, "horovodrun", f'[launcher_options.horovodrun]\ncontroller = "{controller}"\n')
    one, two = rows
    hellos = [e for rank in every_rank_events(two, "hello") for e in rank]
    assert sorted(h["rank"] for h in hellos) == [0, 1]
    assert {h["backend"] for h in hellos} == {f"horovod-{controller}"}  # the controller Horovod really ran
    # 2 processes: every fp32 gradient goes to allreduce each step; 1 process: Horovod sends nothing
    assert two["bytes_per_step"] == 25_557_032 * 4 and two["compression_ratio"] == 1.0
    assert one["bytes_per_step"] == 0


@needs_mpirun
def test_mpirun_starts_horovod_ranks(write_scenario, tmp_path):
    rows = _run(write_scenario, tmp_path, "mpirun")
    hellos = [e for rank in every_rank_events(rows[1], "hello") for e in rank]
    assert {h["backend"] for h in hellos} == {"horovod-mpi"}


def test_fp16_compression_halves_the_bytes_and_keeps_ranks_identical(write_scenario, tmp_path):
    text = SCENARIO.format(launcher="horovodrun").replace("procs_per_node = [1, 2]", "procs_per_node = 2")
    text = text.replace('workload = "resnet50"', 'workload = "digits"').replace('size = "tiny"', 'size = "small"')
    text = text.replace('[matrix]', '[matrix]\nstrategy = ["allreduce", "fp16"]')
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert [r["status"] for r in rows] == ["ok", "ok"], [r.get("reason") for r in rows]
    fp32, fp16 = sorted(rows, key=lambda r: r["strategy"] != "allreduce")
    assert fp16["bytes_per_step"] * 2 == fp32["bytes_per_step"] > 0
    assert fp16["compression_ratio"] == 2.0
    assert fp16["weights_consistent"] is True
    assert_compute_attributed(fp32)  # the worker timed its passes


def test_real_images_from_local_storage(write_scenario, tmp_path):
    from harness.storage import datagen

    root = tmp_path / "imagenet"
    datagen.make(datagen.parse_spec({"count": 8, "classes": 2, "min_kb": 5, "max_kb": 10, "layout": "files"},
                                    "test"), root)
    text = SCENARIO.format(launcher="horovodrun").replace("procs_per_node = [1, 2]", "procs_per_node = 2")
    text = text.replace("[matrix]", '[matrix]\nstorage = "local"') + f"""
[storage_options.local]
url = "{root}"
verify_fraction = 1.0
loader_workers = 1
"""
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["weights_consistent"] is True and row["storage"] == "local"
    assert row["objects_verified"] > 0 and row["loader_throughput"] > 0  # every image read was checked
    data = [e for rank in every_rank_events(row, "data") for e in rank]
    assert len(data) == 2 and all(d["bytes_read"] > 0 for d in data)  # each rank read its own shard


def test_bf16_autocast_and_channels_last_on_two_ranks(write_scenario, tmp_path):
    text = SCENARIO.format(launcher="horovodrun").replace("procs_per_node = [1, 2]", "procs_per_node = 2")
    text = text.replace("[matrix]", '[matrix]\nprecision = ["amp_bf16", "amp_fp16"]\nmemory_format = "channels_last"')
    rows = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    bf16, fp16 = sorted(rows, key=lambda r: r["precision"])
    assert bf16["status"] == "ok", bf16["reason"]
    assert bf16["weights_consistent"] is True and bf16["layout"] == "NHWC"
    assert bf16["first_loss"] > 0 and bf16["last_loss"] > 0
    # a CPU-only Horovod build declares no float16 autocast: a skipped row, nothing launched
    assert fp16["status"] == "skipped" and "amp_fp16" in fp16["reason"]


# A real one-node SLURM cluster (tests/conftest.py): root only, skipped with the reason elsewhere.
from tests.conftest import IN_SLURM_NAMESPACE  # noqa: E402
from tests.helpers.records import every_rank_events
from tests.runs.test_engines import _run as run_cli  # noqa: E402


def test_slurm_ranks_started_by_srun_join_through_pmix(slurm_conf, tmp_path):
    path = tmp_path / "slurm.toml"
    path.write_text(SCENARIO.format(launcher="slurm").replace("procs_per_node = [1, 2]", "procs_per_node = 2"))
    results = tmp_path / "pmix"
    (row,) = run_cli(IN_SLURM_NAMESPACE, path, results, {"SLURM_CONF": slurm_conf, "SLURM_MPI_TYPE": "pmix"})
    assert row["status"] == "ok", row["reason"]
    assert row["launcher"] == "slurm" and row["world_size"] == 2 and row["weights_consistent"] is True
    assert {e["backend"] for rank in every_rank_events(row, "hello") for e in rank} == {"horovod-mpi"}
    # without PMI every rank would start MPI alone: the worker says what to set, before MPI aborts
    (row,) = run_cli(IN_SLURM_NAMESPACE, path, tmp_path / "none", {"SLURM_CONF": slurm_conf, "SLURM_MPI_TYPE": "none"},
                     expect_failed=True)
    assert row["status"] == "failed" and "set SLURM_MPI_TYPE=pmix" in row["reason"], row["reason"]
