"""Hardening, third pass (issue 52): two --resume at once, equivalence's bounds, load limits. Each test failed
on the code before its fix: two --resume of one sweep both ran its missing runs (two rows for one
configuration and repeat), a resume scrubbed the folders of runs another harness was still running,
equivalence took --steps -1 (running on) and --steps 1 (a loss that cannot fall), 3,000 nested TOML arrays
were a RecursionError, `data make` onto a file a traceback, and rates in other scripts' digits or of absurd
size, Kubernetes values that are no quantities, claim names with "..", and unbounded names and strings loaded."""

from __future__ import annotations

import pytest

from harness.base import config
from harness.base.errors import UserError
from harness.cli import main as cli
from harness.cli.sweep import MAX_STEPS
from harness.experiment import scenario
from harness.results import provenance, table as results
from harness.running import runner

# two processes a run: more than the one worker allowed, so each run is a skipped row and nothing starts
DOC = {"name": "locked", "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny",
                                    "procs_per_node": [2]}, "settings": {"repeats": 2}}


@pytest.fixture
def swept(tmp_path, monkeypatch):
    # the machine's facts come from git, mpirun and uname: processes a unit test does not start
    monkeypatch.setattr(provenance, "machine", lambda: {"host": "m1", "os": "Linux", "cpu_model": "cpu", "cpu_cores": 2})
    parsed = scenario.parse(DOC, "s.toml")
    rows = runner.run_sweep(parsed, tmp_path, max_workers=1)
    assert [r["status"] for r in rows] == ["skipped", "skipped"]  # not completed: a resume runs them again
    return parsed, tmp_path, rows[0]["sweep_id"]


def test_a_resume_while_the_sweep_is_resumed_is_refused_in_one_line(swept):
    parsed, folder, sweep = swept
    with runner.sweep_lock(folder, folder / "runs" / sweep):
        with pytest.raises(UserError, match=rf"sweep {sweep} is being run or resumed by another rosetta") as info:
            runner.run_sweep(parsed, folder, resume=True, max_workers=1)
    assert "\n" not in str(info.value) and len(results.load(folder)) == 2  # nothing ran


def test_the_lock_is_held_from_reading_what_is_done_to_the_last_run(swept):
    parsed, folder, _ = swept
    refused = []

    class Second:  # a second --resume started while the first is between its runs
        def run_started(self, index, total, spec):
            with pytest.raises(UserError, match="being run or resumed") as info:
                runner.run_sweep(parsed, folder, resume=True, max_workers=1)
            refused.append(str(info.value))

        def step(self, spec, event): ...
        def run_finished(self, row): ...

    assert len(runner.run_sweep(parsed, folder, Second(), resume=True, max_workers=1)) == 2
    table = results.load(folder)
    assert len(refused) == 2 and len(table) == 4 and table.groupby(["config_id", "repeat"]).size().max() == 2
    assert len(runner.run_sweep(parsed, folder, resume=True, max_workers=1)) == 2  # released: resumes again


def test_a_resume_leaves_the_runs_of_a_sweep_another_harness_runs_alone(swept, tmp_path, monkeypatch):
    _, folder, _ = swept
    monkeypatch.setenv("ROSETTA_TEST_TOKEN", "s3cr3t-value-0123456789")
    other = folder / "runs" / "20261203T000000Z-abcdef"
    (other / "0000").mkdir(parents=True)
    log = other / "0000" / "launcher.log"
    log.write_text("token s3cr3t-value-0123456789\n")
    with runner.sweep_lock(folder, other):
        assert runner.scrub_unfinished(folder) == []  # its run is not over: its files are its own
    assert runner.scrub_unfinished(folder) == [log]


@pytest.mark.parametrize("steps", ["-1", "1", str(MAX_STEPS + 1), "two", "1e3"])
def test_equivalence_steps_out_of_bounds_are_refused_in_one_line(steps, capsys):
    assert cli.main(["equivalence", "--steps", steps]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--steps" in err


# ------------------------------------------------------------------ load limits (each was a traceback or passed)

MINIMAL = {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny"}


@pytest.mark.parametrize("text", ["x = " + "[" * 3000 + "]" * 3000, "x = " + "{a = " * 3000 + "1" + "}" * 3000,
                                  "[" + ".".join(["a"] * 3000) + "]\nb = 1", "x = " + "[" * 40 + "]" * 40])
def test_deeply_nested_toml_is_one_line(text, tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text(text)
    with pytest.raises(UserError, match="nested deeper than 32") as info:
        config.read_toml(path)
    assert "\n" not in str(info.value)


def test_data_make_onto_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    for out in (tmp_path / "f", tmp_path / "f" / "sub"):
        assert cli.main(["data", "make", str(out), "--kind", "imagenet"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(out) in err and "Error" not in err, err


@pytest.mark.parametrize("rate", ["\u0661\u0660gbit", "\uff11gbit", "1" * 40 + "gbit", "99999999gbit", "1kbit",
                                  "10gbit\n", "0gbit", "1e3mbit"])
def test_network_rates_are_ascii_and_a_links(rate):
    with pytest.raises(UserError, match=r"\[matrix\] network") as info:
        scenario.parse({"matrix": {**MINIMAL, "network": [rate]}}, "s.toml")
    assert "\n" not in str(info.value)


def test_ordinary_rates_load():
    parsed = scenario.parse({"matrix": {**MINIMAL, "network": ["unlimited", "10gbit", "100mbit", "8kbit", "1600gbit"]}},
                            "s.toml")
    assert len(parsed.matrix.network) == 5


@pytest.mark.parametrize("key, value", [("cpu", "lots"), ("cpu", "8 cores"), ("cpu", "\u0668"), ("memory", "64 Gi"),
                                        ("memory", "64GB"), ("results_claim", "../etc"), ("results_claim", "a..b"),
                                        ("results_claim", "Results"), ("namespace", "my.ns"), ("runtime", "-x")])
def test_kubernetes_values_are_quantities_and_names(key, value):
    with pytest.raises(UserError, match=rf"launcher_options\.kubernetes\] {key}: must be") as info:
        scenario.parse({"matrix": {**MINIMAL, "launcher": "kubernetes"},
                        "launcher_options": {"kubernetes": {key: value}}}, "s.toml")
    assert "\n" not in str(info.value)


def test_kubernetes_ordinary_values_load():
    options = {"cpu": "500m", "memory": "64Gi", "results_claim": "rosetta-results.v1", "namespace": "ml-team",
               "runtime": "torch-distributed"}
    parsed = scenario.parse({"matrix": {**MINIMAL, "launcher": "kubernetes"},
                             "launcher_options": {"kubernetes": options}}, "s.toml")
    assert parsed.launcher_options["kubernetes"].memory == "64Gi"


@pytest.mark.parametrize("doc, key", [({"name": "n" * 129}, "name"), ({"description": "d" * 2001}, "description"),
                                      ({"launcher_options": {"kubernetes": {"image": "i" * 10_001}}}, "image")])
def test_names_descriptions_and_strings_have_a_length_limit(doc, key):
    with pytest.raises(UserError, match=rf"{key}: must be at most [0-9,]+ characters, got") as info:
        scenario.parse({"matrix": {**MINIMAL, "launcher": "kubernetes"}, **doc}, "s.toml")
    assert "\n" not in str(info.value)


def test_a_straggler_without_a_score_says_so_not_nanx():
    """A row with a slowest host but an empty straggler_score printed "nanx the median rank" (issue 52's sink fuzz)."""
    import math

    from harness.gate.where import Straggler, Where

    text = Where(Straggler("m1", 0, math.nan), Straggler("m2", None, math.nan)).text()
    assert "nan" not in text and text.count("no score recorded") == 2
    assert "1.25x the median rank" in Where(Straggler("m1", 0, 1.25), None).text()
