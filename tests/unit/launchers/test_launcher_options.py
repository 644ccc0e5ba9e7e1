"""Launcher options that reach a script (issue 35): a newline or control character in any string option of any
launcher is one line and exit 2 naming the key; a hostile one-line value (spaces, quotes, ';', '$(...)', '#')
comes out of every launcher's dry run as one argument, read back the way each consumer reads it (sbatch's
#SBATCH parser, the shell, YAML, an argument list, ssh's remote command line)."""

from __future__ import annotations

import dataclasses
import json
import shlex
import typing

import pytest
import yaml

from harness import launchers
from harness.base.errors import UserError
from harness.cli import main as cli
from harness.experiment import scenario
from harness.launchers.slurm import sbatch_quoted
from harness.running import runner

HOSTILE = "a b;$(touch pwned)'\"#c\\d"  # unbalanced quotes: pasted raw into a shell line, it cannot be parsed
MARK = "$(touch pwned)"


def _string_options() -> list[tuple[str, str, bool]]:
    """(launcher, option, is a list) for every string option of every registered launcher."""
    out = []
    for name in launchers.names():
        options = launchers.module(name).Options
        hints = typing.get_type_hints(options)
        out += [(name, f.name, hints[f.name] != str) for f in dataclasses.fields(options)
                if hints[f.name] in (str, tuple[str, ...])]
    return out


OPTIONS = _string_options()


def _doc(launcher: str, options: dict) -> dict:
    return {"settings": {"repeats": 1}, "launcher_options": {launcher: options},
            "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "launcher": launcher}}


@pytest.mark.parametrize("launcher, key, listed", OPTIONS, ids=[f"{n}.{k}" for n, k, _ in OPTIONS])
@pytest.mark.parametrize("bad", ["debug\ntouch /tmp/pwned", "x\r", "a\x00b", "tab\there", "\x1b[31mred"])
def test_a_control_character_in_any_launcher_option_is_one_line_naming_the_key(launcher, key, listed, bad,
                                                                               write_scenario, capsys):
    bad = f"k={bad}"  # key=value where an option takes that form (node_selector)
    value = [bad] if listed else bad
    # a host list is checked as host names first (harness.launchers.hosts.HOST_FIELD), Kubernetes' names and
    # quantities as what the API server takes: refused all the same
    why = ("must be a host name" if key in ("hosts", "addresses") else "must be" if launcher == "kubernetes" and key
           in ("namespace", "cpu", "memory", "results_claim", "runtime") else "holds a newline")
    with pytest.raises(UserError, match=rf"^s.toml: \[launcher_options.{launcher}\] {key}: {why}"):
        scenario.parse(_doc(launcher, {key: value}), "s.toml")
    path = write_scenario(f'[matrix]\nframework = "torch_ddp"\nworkload = "resnet50"\nlauncher = "{launcher}"\n'
                          f'[launcher_options.{launcher}]\n{key} = {json.dumps(value)}\n')
    assert cli.main(["run", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{key}: {why}" in err


def sbatch_arguments(line: str) -> list[str]:
    """The arguments of an #SBATCH line as sbatch reads them: SLURM's _get_argument (src/sbatch/opt.c),
    line for line: a backslash escapes the next character anywhere, ' and " group, '#' outside quotes ends
    the line."""
    args, ptr = [], 0
    while True:
        while ptr < len(line) and line[ptr].isspace():
            ptr += 1
        if ptr >= len(line):
            return args
        arg, quoted, q_char, escape = [], False, "", False
        while ptr < len(line) and (quoted or not line[ptr].isspace()):
            c = line[ptr]
            if escape:
                escape = False
            elif c == "\\":
                escape, ptr = True, ptr + 1
                continue
            elif quoted:
                if c == q_char:
                    quoted, ptr = False, ptr + 1
                    continue
            elif c in "\"'":
                quoted, q_char, ptr = True, c, ptr + 1
                continue
            elif c == "#":
                return args + ["".join(arg)] if arg else args
            arg.append(c)
            ptr += 1
        args.append("".join(arg))


def test_sbatch_quoting_is_read_back_by_slurms_own_rules():
    for value in (HOSTILE, "/results with space/slurm-%j.out", "plain", "a#b", "'", '"', "\\"):
        assert sbatch_arguments(f"--output={sbatch_quoted(value)} # a comment") == [f"--output={value}"]


def _read(value: str) -> list[str]:
    """A value handed on, as what reads it sees it: JSON (a spec carried in a variable) as its strings."""
    if value[:1] in "{[":
        try:
            return _leaves(json.loads(value))
        except ValueError:
            pass
    return [value]


def _tokens(run_dir) -> list[str]:
    """Every argument the launch hands on, read as its consumer reads it."""
    tokens = []
    record = json.loads((run_dir / "command.json").read_text())
    for argv in [record["argv"], *record["setup"], *record["also"], *record["abort"]]:
        if argv[:4] == ["ssh", "-o", "BatchMode=yes", "--"]:  # ssh joins what follows the host for the remote shell
            argv = [*argv[:5], *shlex.split(" ".join(argv[5:]))]
        for i, arg in enumerate(argv):
            tokens += shlex.split(arg) if i and argv[i - 1] == "-c" else _read(arg)  # bash -c: a shell's line
    tokens += [f"{k}={x}" for k, v in record["env"].items() for x in _read(v)]
    for path in run_dir.iterdir():
        text = path.read_text() if path.suffix != ".json" else ""
        if path.name == "job.sbatch":
            for line in text.splitlines():
                if line.startswith("#SBATCH"):
                    tokens += sbatch_arguments(line[len("#SBATCH"):])
                elif not line.startswith("#") and line.strip():
                    tokens += shlex.split(line, comments=True)  # raises on a value pasted raw
        elif path.suffix in (".yaml", ".yml"):
            tokens += _leaves(list(yaml.safe_load_all(text)))
    return tokens


def _leaves(value) -> list[str]:
    if isinstance(value, dict):  # a job's "command" string (Azure ML's) is run by a shell
        return [x for k, v in value.items()
                for x in [str(k), *(shlex.split(v) if k == "command" and isinstance(v, str) else _leaves(v))]]
    if isinstance(value, list):
        out = [x for v in value for x in _leaves(v)]
        for i, v in enumerate(value):  # ["bash", "-c", "line"]: the line as the shell reads it
            if i and value[i - 1] == "-c" and isinstance(v, str):
                out += shlex.split(v)
        return out
    return _read(value) if isinstance(value, str) else [str(value)] if value is not None else []


@pytest.mark.runs
@pytest.mark.parametrize("launcher, key, listed", OPTIONS, ids=[f"{n}.{k}" for n, k, _ in OPTIONS])
def test_a_hostile_value_comes_out_of_every_launchers_dry_run_as_one_argument(launcher, key, listed, tmp_path):
    """Where the value reaches the launch at all, every argument that holds part of it holds all of it."""
    options = {key: [HOSTILE] if listed else HOSTILE}
    if launcher in ("torchrun", "mpirun") and key != "hosts":
        options.update(hosts=["h1", "h2"], remote="ssh")  # the remote command line, through ssh
    doc = _doc(launcher, options)
    if "hosts" in options:
        doc["matrix"]["nodes"] = 2
    try:
        parsed = scenario.parse(doc, "s.toml")
        ((_spec, run_dir, _reason),) = runner.dry_run(parsed, tmp_path)
    except UserError as exc:  # refused as a value the option cannot hold: never a launch
        assert "\n" not in str(exc)
        return
    broken = [t for t in _tokens(run_dir) if MARK in t and HOSTILE not in t]
    assert not broken, f"{launcher}.{key}: the value was split or read as syntax: {broken}"


def test_results_paths_with_spaces_stay_one_argument_in_the_batch_script(tmp_path):
    parsed = scenario.parse(_doc("slurm", {"partition": "gpu debug"}), "s.toml")
    ((_spec, run_dir, _reason),) = runner.dry_run(parsed, tmp_path / "my results #1")
    lines = [ln for ln in (run_dir / "job.sbatch").read_text().splitlines() if ln.startswith("#SBATCH")]
    arguments = [a for ln in lines for a in sbatch_arguments(ln[len("#SBATCH"):])]
    assert f"--output={run_dir / 'slurm-%j.out'}" in arguments and "--partition=gpu debug" in arguments
    assert all(len(sbatch_arguments(ln[len("#SBATCH"):])) == 1 for ln in lines)
