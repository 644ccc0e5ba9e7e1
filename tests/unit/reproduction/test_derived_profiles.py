"""An accelerator profile derived from a reference (its source says so) is that reference's own smallest
published point: batch / compute_s is the series' first throughput a GPU (in samples: a decoder's sequences are
its tokens), and the reference names the profile (for the series it was derived from, where each has its own, and
for its model: the classic tables' series each train another)."""

from __future__ import annotations

import re

import pytest

from harness.machines import accelerators
from harness.reproduction import reference
from harness.reproduction.prediction import samples_per_item

DERIVED = re.compile(r"^derived from the reference: results/reference/([\w.-]+)\.toml")


def derived_profiles():
    return [p for p in accelerators.load_profiles()[0] if DERIVED.match(p.source)]


def test_the_references_without_a_measured_profile_have_derived_ones():
    covered = {DERIVED.match(p.source).group(1) for p in derived_profiles()}
    assert {"batchai-tf-v100", "tf-docs-k80-distributed", "dle-bert-large-a100", "torchtitan-llama31-8b-h100",
            "batchai-tf-p100-p40-k80", "dlperf-rn50-4x8", "horovod-readme-16gpu", "tf-docs-dgx1"} <= covered


@pytest.mark.parametrize("profile", derived_profiles(), ids=lambda p: f"{p.accelerator}-{p.workload.value}-{p.batch}")
def test_a_derived_profile_is_its_references_smallest_point(profile):
    ref = reference.get(DERIVED.match(profile.source).group(1))
    assert ref.published is not None
    labels = {run.series for run in ref.published.runs if (run.accelerator or ref.published.accelerator) ==
              profile.accelerator and run.batch_per_worker == profile.batch and run.precision == profile.precision.value
              and ref.published.workload_of(run) == profile.workload.value}
    firsts = [s.throughput[0] / s.gpus[0] for s in ref.series if s.label in labels and s.gpus[0] == min(s.gpus)]
    assert firsts, f"{ref.id}: no published point at batch {profile.batch}, {profile.precision.value}"
    assert profile.batch * samples_per_item(ref) / profile.compute_s == pytest.approx(firsts[0], rel=1e-3)
