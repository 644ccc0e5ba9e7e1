"""A reference whose series differ in what the emulated cluster is made of (their GPU model, their stack's links)
runs --at emulated as a scenario per set of series, each over its own accelerator and links, and its report
compares each series with the rows of its own scenario."""

from __future__ import annotations

import pandas as pd

from harness.reproduction import emulated_reproduction as emulated
from harness.reproduction import reference
from harness.reproduction.prediction import predicted_rows

HOSTS = {f"h{i}": f"10.0.0.{i + 1}" for i in range(8)}


def test_batchai_tf_runs_its_two_series_over_their_own_links():
    ref = reference.get("batchai-tf-v100")
    scenarios = emulated.emulated_scenarios(ref, HOSTS)
    links = {s.name: (s.emulation.accelerator, s.emulation.intra_link, s.emulation.inter_link) for s in scenarios}
    assert links == {"emulated-batchai-tf-v100-series1": ("v100-tf", "IntelMPI-shm-2018", "IntelMPI-IB-2018"),
                     "emulated-batchai-tf-v100-series2": ("v100-tf", "PCIe3", "TCP-cloud-2018")}
    assert [1 + len(s.include) for s in scenarios] == [5, 5]  # 1 to 32 GPUs each
    assert emulated.scenario_of(ref, "Open MPI + NCCL (TCP)") == "emulated-batchai-tf-v100-series2"


def test_three_gpu_models_are_three_scenarios_and_one_link_set_stays_one():
    three = emulated.emulated_series(reference.get("batchai-tf-p100-p40-k80"))
    assert [part.published.accelerator for _, part in three] == ["p100-azure-tf", "p40-azure-tf", "k80-azure-tf"]
    single = reference.get("batchai-torch-v100")
    assert [name for name, _ in emulated.emulated_series(single)] == ["emulated-batchai-torch-v100"]
    assert emulated.scenario_of(single, single.series[0].label) is None


def test_each_series_is_compared_with_its_own_scenarios_rows():
    ref = reference.get("batchai-tf-v100")
    rows = pd.DataFrame([{"device": "emulated", "status": "ok", "framework": "horovod_tf", "batch_per_worker": 64,
                          "precision": "fp32", "world_size": n, "throughput": 357.0 * n * eff, "dilation": 16.0,
                          "emulation_saturated": False, "scenario": f"emulated-batchai-tf-v100-{series}"}
                         for series, effs in (("series1", (1, 0.70, 0.64, 0.60, 0.58)), ("series2", (1, 0.9, 0.45, 0.4, 0.38)))
                         for n, eff in zip((1, 4, 8, 16, 32), effs)])
    lines = emulated.error_lines(ref, rows, predicted_rows(ref))
    intel, tcp = lines[0], lines[2]
    assert "(Intel MPI (InfiniBand), horovod_tf)" in intel and "70% vs 69% at 4" in intel and "58% vs 57% at 32" in intel
    assert "(Open MPI + NCCL (TCP), horovod_tf)" in tcp and "45% vs 44% at 8" in tcp and "38% vs 37% at 32" in tcp


def test_the_report_reads_a_sweep_per_set_of_series_together(tmp_path):
    from harness.reproduction.prediction import reproduction_report
    from harness.results import table as results
    from tests.helpers.rows import result_row

    ref = reference.get("batchai-tf-v100")
    rows = []
    for sweep, series, effs in (("sA", "series1", (1, 0.70, 0.64, 0.60, 0.58)),
                                ("sB", "series2", (1, 0.9, 0.45, 0.4, 0.38))):
        for i, (n, eff) in enumerate(zip((1, 4, 8, 16, 32), effs)):
            rows.append(result_row(sweep_id=sweep, run_id=f"{sweep}/{i:04d}", config_id=f"{sweep}{n}",
                                   scenario=f"emulated-batchai-tf-v100-{series}", framework="horovod_tf",
                                   size="full", nodes=max(1, n // 4), procs_per_node=min(n, 4), world_size=n,
                                   batch_per_worker=64, global_batch=64 * n, device="emulated",
                                   throughput=357.0 * n * eff, dilation=16.0, emulation_saturated=False))
    results.append(tmp_path, rows)
    text = " ".join(str(item) for item in reproduction_report(ref, tmp_path, "sA,sB"))
    assert "vs published (Intel MPI (InfiniBand), horovod_tf)" in text and "58% vs 57% at 32" in text
    assert "vs published (Open MPI + NCCL (TCP), horovod_tf)" in text and "38% vs 37% at 32" in text
    assert (tmp_path / "reproduce-batchai-tf-v100-sA.png").exists()
    assert "sweep `sA, sB`" in (tmp_path / "reproduce-batchai-tf-v100-sA.md").read_text()
