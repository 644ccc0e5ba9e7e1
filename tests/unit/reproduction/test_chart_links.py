"""The links of the charts (harness/machines/interconnects.toml): every preset states its source, every link a
reference names is a preset, and the fitted stacks of 2018 hold what their sources say of the Batch AI chart."""

from __future__ import annotations

import pytest

from harness.machines import interconnects
from harness.reproduction import prediction, reference

LINKS = interconnects.load_presets().links


def test_every_preset_has_a_title_and_a_source():
    assert all(link.title and len(link.source) > 20 for link in LINKS.values())
    assert {"IB-FDR", "IB-EDR", "IB-HDR", "NVLink1", "NVLink", "NVLink3", "NVLink4", "NVLink5", "TCP-cloud-2018",
            "IntelMPI-shm-2018", "IntelMPI-IB-2018"} <= set(LINKS)


def test_every_link_a_reference_names_is_a_preset():
    for ref in reference.all_references().values():
        if ref.published is None:
            continue
        named = {ref.published.intra_link, ref.published.inter_link}
        named |= {link for run in ref.published.runs for link in (run.intra_link, run.inter_link)}
        assert named - {""} <= set(LINKS), ref.id


def model_errors(series: str) -> dict[int, float]:
    rows = prediction.predicted_rows(reference.get("batchai-tf-v100"))
    rows = rows[rows["series"] == series]
    return dict(zip(rows["workers"], rows["error_pp"]))


def test_the_intel_mpi_series_runs_over_its_own_stack_and_holds_at_the_points_not_fitted():
    runs = {run.series: run for run in reference.get("batchai-tf-v100").published.runs}
    assert (runs["Intel MPI (InfiniBand)"].intra_link, runs["Intel MPI (InfiniBand)"].inter_link) == \
        ("IntelMPI-shm-2018", "IntelMPI-IB-2018")
    errors = model_errors("Intel MPI (InfiniBand)")
    assert abs(errors[4]) < 0.5 and abs(errors[8]) < 0.5  # fitted there
    assert errors[16] == pytest.approx(1.5, abs=0.3) and errors[32] == pytest.approx(2.9, abs=0.3)  # as the source says


def test_the_tcp_series_over_nccls_2018_sockets_fitted_on_another_chart():
    errors = model_errors("Open MPI + NCCL (TCP)")
    assert all(abs(errors[n]) < 6 for n in (4, 8, 16, 32)), errors
