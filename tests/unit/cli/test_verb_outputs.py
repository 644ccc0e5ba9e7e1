"""Nothing a user sees changed when the house moved: every read-only verb prints, for one fixed store, what it
printed before (tests/data/verbs/, recorded at commit 6ee4b5a by tests/helpers/verb_outputs.py; since then
changed on purpose only where a file moved: the accelerator profiles' path in `reproduce --list`; and where a
framework, launcher or workload joined: jax and spark in `list`, jax in dlperf-rn50-4x8's runs, the classic
scaling tables' models in `list` and their references' series in `reproduce --list`; and where `--at emulated`
began to run points beyond memory reduced, the points `reproduce --list` says are reduced or skipped)."""

from __future__ import annotations

import difflib

import pytest

from tests.helpers import REPO
from tests.helpers.verb_outputs import CASES, record

RECORDED = REPO / "tests" / "data" / "verbs"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return record(tmp_path_factory.mktemp("verbs"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_verb_prints_what_it_printed_before(case, outputs):
    expected = (RECORDED / f"{case}.txt").read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), outputs[case].splitlines(True), "recorded", "now"))
    assert outputs[case] == expected, f"{case} changed (rewrite tests/data/verbs/{case}.txt if on purpose):\n{diff}"


def test_every_recorded_output_is_a_case():
    assert sorted(p.stem for p in RECORDED.glob("*.txt")) == sorted(CASES)
