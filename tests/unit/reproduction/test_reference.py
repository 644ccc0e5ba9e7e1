"""Published references as data, and rosetta reproduce on real runs."""

import pytest

from harness.base.errors import UserError
from harness.cli import main as cli
from harness.reproduction import reference, reproduce


def test_every_reference_file_loads_and_keeps_the_published_efficiencies():
    refs = reference.all_references()
    assert len(refs) >= 15
    for ref in refs.values():
        assert ref.source and ref.unit and ref.configuration.hardware
        assert ref.reproduce.not_reproduced, f"{ref.id}: say what is not reproduced"
    batchai = refs["batchai-tf-v100"]
    intel, open_mpi = batchai.series
    assert intel.efficiencies()[-1] == pytest.approx(0.57, abs=0.005)  # 32 GPUs, as published
    assert open_mpi.efficiencies()[-1] == pytest.approx(0.37, abs=0.005)
    assert any("InfiniBand vs TCP" in c for c in batchai.caveats)
    assert refs["batchai-torch-v100"].series[0].efficiencies()[1] == pytest.approx(0.94, abs=0.005)
    horovod = refs["horovod-readme-16gpu"]
    assert [round(s.efficiencies()[-1], 2) for s in horovod.series[:3]] == [0.94, 0.91, 0.85]
    assert refs["horovod-docs-128gpu"].series[2].efficiencies() == [0.79, 0.68]  # as stated


def test_a_bad_reference_file_is_one_line_naming_the_key(tmp_path):
    good = (reference.REFERENCE_DIR / "batchai-torch-v100.toml").read_text()
    path = tmp_path / "batchai-torch-v100.toml"
    path.write_text(good.replace("throughput = [331, 1244, 1202, 2124, 4080]", "throughput = [331, 1244]"))
    with pytest.raises(UserError, match=r"\[series\]\[0\] throughput: has 2 values for 5 gpus"):
        reference.load(path)
    path.write_text(good.replace("format = 1", "format = 2"))
    with pytest.raises(UserError, match="reference format 1"):
        reference.load(path)
    path.write_text('favourite = "x"\n' + good)
    with pytest.raises(UserError, match="favourite: unknown key"):
        reference.load(path)


def test_a_reference_that_cannot_run_here_says_why():
    with pytest.raises(UserError, match="compares GPU models"):
        reproduce.scenario_for(reference.get("batchai-tf-p100-p40-k80"))


def test_the_reduced_run_takes_another_launcher():
    """SparkNet's row inside Spark: `rosetta reproduce sparknet-2016 --launcher spark`."""
    from harness.experiment.matrix import expand

    ref = reference.get("sparknet-2016")
    assert {run.launcher for run in expand(reproduce.scenario_for(ref, {"launcher": "spark"}))} == {"spark"}
    assert {run.launcher for run in expand(reproduce.scenario_for(ref, {"launcher": None}))} == {"torchrun"}  # its own


@pytest.mark.runs
@pytest.mark.parametrize("name", ["batchai-tf-v100", "horovod-readme-16gpu"])
def test_reproduce_runs_plots_and_says_what_transfers(name, tmp_path, capsys):
    pytest.importorskip("torch")
    results = tmp_path / "results"
    code = cli.main(["reproduce", name, "--results", str(results), "--size", "tiny", "--repeats", "1",
                     "--measured-steps", "3"])
    out = capsys.readouterr().out
    assert code == 0, out
    (chart,) = results.glob(f"reproduce-{name}-*.png")
    (doc,) = results.glob(f"reproduce-{name}-*.md")
    assert chart.stat().st_size > 20_000
    text = doc.read_text()
    assert f"![measured vs published]({chart.name})" in text
    assert "Measured scaling efficiency" in text and "Not reproduced:" in text and "Transfers:" in text
    assert "| measured |" in text and "| published |" in text
    if name == "batchai-tf-v100":
        assert "Open MPI + NCCL (TCP) / Intel MPI (InfiniBand): 1.27 at 4" in text  # same 1-GPU base
        assert "only one series was measured here" in text


def test_published_ratios_follow_the_declared_pairs():
    import pandas as pd

    ref = reference.get("horovod-readme-16gpu")
    table = reproduce.comparison_table(ref, pd.DataFrame(columns=["throughput_median"]))
    lines = reproduce.ratios(table, "published", ref.ratios)
    assert lines[0] == "distributed TensorFlow, InceptionV3 / Horovod RDMA + NCCL, InceptionV3: 0.66 at 16"
    assert len(lines) == 3 and "VGG-16 / Horovod RDMA + NCCL, VGG-16: 0.04 at 16" in lines[2]
