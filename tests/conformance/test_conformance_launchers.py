"""One suite every launcher in harness.launchers.REGISTRY passes (a new launcher is picked up by itself):
its module has what the registry's docstring asks for, it turns a small run into argument lists,
variables and files, and `rosetta run --dry-run` writes exactly what it builds (spec and command read
back). Hostile string option values are refused at load or reach the command as the single argument they
are (never a shell line, never a line of their own in a batch script or manifest).

HOSTILE holds the values tried on every string option of every launcher; issue 35's hardening adds its
cases there (and launchers' checks then refuse more of them at load, which the test accepts). The cases
that fail today are in KNOWN_UNSAFE, strict expected failures naming issue 35: its fix turns them into
unexpected passes, which fail until their entry goes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import sys
import textwrap
import typing
from pathlib import Path

import pytest
import yaml

import frameworks
from harness import launchers
from harness.base.errors import UserError
from harness.cli.main import main
from harness.contract.spec import read_spec_file
from harness.experiment import scenario
from harness.experiment.matrix import expand
from harness.launchers import LaunchCommand, LaunchRequest
from harness.results import provenance

LAUNCHERS = launchers.names()
PINNED_PORT = 29555  # options naming a port get this one, so that two builds of one run are the same
HOSTILE = [
    "x; touch /tmp/rosetta-pwned",  # a shell's command separator
    "$(touch /tmp/rosetta-pwned)",  # command substitution
    "a b",  # a space: one argument, not two
    "x\n#SBATCH --wrap=touch /tmp/rosetta-pwned",  # a line of its own in a batch script
    "x\nkind: Pod",  # a key of its own in a manifest
    "'\"`",  # quotes and a backtick
    "a #b\\c",  # a comment sign and a backslash (sbatch reads both in #SBATCH lines: tests/unit/launchers/test_launcher_options.py)
    "x\ry\x1b[31m",  # a carriage return and a terminal escape: refused, as every control character
]

# (launcher, option) -> (which values it still mishandles, why): issue 35 removes these
KNOWN_UNSAFE: dict = {}  # issue 35's (a newline in slurm's options, a selector without '=') are fixed


def framework_for(launcher: str) -> str:
    """The first registered framework the launcher can start (every launcher serves one)."""
    return next(name for name in frameworks.names() if launcher in frameworks.get(name).launchers)


def _string_options(launcher: str) -> list[str]:
    hints = typing.get_type_hints(launchers.module(launcher).Options)
    return [f.name for f in dataclasses.fields(launchers.module(launcher).Options)
            if hints[f.name] in (str, tuple[str, ...]) and f.name not in ("hosts", "addresses")]  # hosts: nodes > 1


def _pinned_ports(launcher: str) -> dict:
    return {f.name: PINNED_PORT for f in dataclasses.fields(launchers.module(launcher).Options)
            if f.name.endswith("port")}


def _scenario_text(launcher: str, options: dict) -> str:
    table = "\n".join(f"{key} = {json.dumps(value)}" for key, value in options.items())
    return textwrap.dedent(f"""
        [settings]
        warmup_steps = 1
        measured_steps = 2
        repeats = 1
        [matrix]
        framework = "{framework_for(launcher)}"
        workload = "resnet50"
        size = "tiny"
        procs_per_node = 2
        launcher = "{launcher}"
        [launcher_options.{launcher}]
        """) + table + "\n"


def _dry_run(launcher: str, options: dict, tmp_path: Path) -> Path:
    """`rosetta run --dry-run` of a one-run scenario through ``launcher``; the run's folder."""
    path = tmp_path / "scenario.toml"
    path.write_text(_scenario_text(launcher, options))
    assert main(["run", str(path), "--dry-run", "--results", str(tmp_path / "results")]) == 0
    (run_dir,) = (tmp_path / "results" / "dry-run").glob("*/0000")
    return run_dir


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_the_module_has_what_the_registry_asks_for(launcher):
    module = launchers.module(launcher)
    assert module.__doc__ and len(module.__doc__.split()) >= 8, f"{module.__name__}: say what it starts, and how"
    assert dataclasses.is_dataclass(module.Options) and module.Options.__dataclass_params__.frozen
    module.Options()  # every option has a default: a scenario need not name any
    assert callable(module.command) and callable(module.unsupported_reason)
    assert any(launcher in frameworks.get(name).launchers for name in frameworks.names()), "no framework uses it"


@pytest.mark.runs
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_it_builds_argv_env_and_files_that_start_the_worker_on_the_spec(launcher, tmp_path):
    run_dir = _dry_run(launcher, _pinned_ports(launcher), tmp_path)
    spec, _ = read_spec_file(run_dir / "spec.json")
    info = frameworks.get(spec.framework)
    request = LaunchRequest(spec, info.worker_module, run_dir / "spec.json", "/venv/bin/python", cpu_count=4,
                            repo_root=Path("/repo"))
    command = launchers.get(launcher)(request)
    assert isinstance(command, LaunchCommand) and command.argv
    for argv in (command.argv, *command.setup, *command.also, *command.abort):
        assert isinstance(argv, tuple) and all(isinstance(a, str) for a in argv), argv  # never a shell string
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in command.env.items())
    assert all(isinstance(k, str) and "/" not in k and isinstance(v, str) for k, v in command.files.items())
    # the ranks run the framework's worker on this spec, named in the argv or in a file the launch hands over;
    # the spec by its file's path, or carried whole where the ranks run elsewhere (a cloud job's variable)
    wherever = [" ".join(command.argv), *(" ".join(a) for a in command.also), *command.files.values()]
    carried = re.sub(r"\s", "", json.dumps(spec.to_json()))
    assert any(info.worker_module in text and (str(run_dir / "spec.json") in text or carried in re.sub(r"\s", "", text))
               for text in wherever)


@pytest.mark.runs
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_the_dry_run_writes_what_the_launcher_builds(launcher, tmp_path):
    """spec.json reads back into the run planned, and command.json and the files are the launcher's own."""
    options = _pinned_ports(launcher)
    run_dir = _dry_run(launcher, options, tmp_path)
    spec, _ = read_spec_file(run_dir / "spec.json")
    (planned,) = expand(scenario.load(tmp_path / "scenario.toml"))
    assert spec == planned
    request = LaunchRequest(spec, frameworks.get(spec.framework).worker_module, run_dir / "spec.json",
                            sys.executable, cpu_count=os.cpu_count() or 1, repo_root=provenance.REPO_ROOT)
    command = launchers.get(launcher)(request)
    record = json.loads((run_dir / "command.json").read_text())
    assert record["argv"] == list(command.argv) and record["files"] == sorted(command.files)
    assert record["also"] == [list(a) for a in command.also]
    for name, text in command.files.items():
        assert (run_dir / name).read_text() == text
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(["command.json", "spec.json", *command.files])
    assert not (tmp_path / "results" / "results.parquet").exists()  # nothing ran, nothing recorded


def _hostile_cases() -> list:
    def marks(launcher: str, key: str, value: str) -> list:
        unsafe, why = KNOWN_UNSAFE.get((launcher, key), (lambda value: False, ""))
        return [pytest.mark.xfail(reason=why, strict=True)] if unsafe(value) else []

    return [pytest.param(launcher, key, value, id=f"{launcher}-{key}-{i}", marks=marks(launcher, key, value))
            for launcher in LAUNCHERS for key in _string_options(launcher) for i, value in enumerate(HOSTILE)]


@pytest.mark.runs
@pytest.mark.parametrize("launcher,key,value", _hostile_cases())
def test_a_hostile_option_value_is_refused_or_stays_one_argument(launcher, key, value, tmp_path):
    kind = typing.get_type_hints(launchers.module(launcher).Options)[key]
    options = {**_pinned_ports(launcher), key: [value] if kind == tuple[str, ...] else value}
    path = tmp_path / "scenario.toml"
    path.write_text(_scenario_text(launcher, options))
    try:
        scenario.load(path)
    except UserError as exc:  # refused: one line naming the option
        assert "\n" not in str(exc) and key in str(exc)
        return
    run_dir = _dry_run(launcher, options, tmp_path)
    record = json.loads((run_dir / "command.json").read_text())
    for argv in (record["argv"], *record["also"], *record["setup"]):
        _assert_whole(value, argv, f"{launcher} {key}: argv {argv}")
    for name in record["files"]:
        _assert_file_keeps_it_whole(value, run_dir / name, f"{launcher} {key}: {name}")


def _assert_whole(value: str, tokens: list[str], where: str) -> None:
    """``value`` is inside one token (never split over several), if it is there at all."""
    joined = " ".join(tokens)
    if value in joined:
        assert any(value in token for token in tokens), f"{where}: {value!r} split over several arguments"


def _assert_file_keeps_it_whole(value: str, path: Path, where: str) -> None:
    """A file written for the launch still parses, a newline in ``value`` made no line of its own, and a
    script's command lines keep ``value`` inside one word."""
    text = path.read_text()
    if "\n" in value:
        injected = value.split("\n", 1)[1]
        assert not any(line.startswith(injected) for line in text.splitlines()), f"{where}: a line of its own"
    if path.suffix in (".yaml", ".yml"):
        list(yaml.safe_load_all(text))
    elif path.suffix == ".json":
        json.loads(text)
    else:  # a batch script
        for line in text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                _assert_whole(value, shlex.split(line), f"{where}: {line!r}")
