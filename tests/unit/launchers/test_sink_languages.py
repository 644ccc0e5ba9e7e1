"""Shell, #SBATCH and YAML from one place each (harness.base.escaping, issue 52): hypothesis picks hostile
strings and feeds them to each language's function and to the sinks that write it (a batch script, ssh's
remote command, a manifest, a command a message tells a user to paste); each is read back the way its
consumer reads it (shlex for the shell, sbatch's own #SBATCH parser, yaml.safe_load) and must give back
exactly what was meant, one word for one value.

Before: a results folder with a line break wrote its rest as the batch script's next line, run by bash
(test_a_line_break_never_becomes_a_line_of_the_batch_script), and the commands the netns and --at emulated
messages tell a user to paste split a path with a space or a quote into several words
(test_a_pasted_command_is_one_word_per_value)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from harness import launchers
from harness.base import escaping
from harness.base.errors import UserError
from harness.launchers import hosts, slurm
from harness.reproduction import prerequisites
from tests.helpers.launch import launch_request, run_spec
from tests.unit.launchers.test_launcher_options import sbatch_arguments

PAYLOADS = ("a b", "$(touch pwned)", "`id`", "x;rm -rf ~", "'", '"', "\\", "#not a comment", "a\tb", "$HOME",
            "--option", "-", "*", "~root", "!!", "a'b\"c\\d", "{a,b}", "x&y|z>w<v", "\u00e9\u4e2d", "- item",
            "key: value", "&anchor", "*alias", "!!python/object:os.system", "---", "...", "? q", "%TAG", "@x",
            "null", "true", "1e3", "0x1F", "", " lead", "trail ")
HOSTILE = st.one_of(st.sampled_from(PAYLOADS),
                    st.text(alphabet=st.sampled_from("ab $`'\"\\;&|<>(){}*?[]~#!%:-,\t\u00e9"), max_size=24))
WITH_BREAKS = st.one_of(HOSTILE, st.text(alphabet=st.sampled_from("ab '\"\\$\n\r\x00#"), max_size=16))


@settings(max_examples=200, deadline=None)
@given(argv=st.lists(WITH_BREAKS, min_size=1, max_size=6))
def test_a_shell_line_reads_back_as_its_words(argv):
    assert shlex.split(escaping.shell_line(argv)) == argv
    assert all(shlex.split(escaping.shell_word(a)) == [a] for a in argv)


@settings(max_examples=200, deadline=None)
@given(value=HOSTILE)
def test_an_sbatch_argument_reads_back_as_one_argument(value):
    line = f"#SBATCH --comment={escaping.sbatch_argument(value)} # a comment after it"
    assert sbatch_arguments(line[len("#SBATCH"):]) == [f"--comment={value}"]


@given(value=st.text(alphabet="ab\n\r\x00", min_size=1).filter(lambda v: set(v) & set("\n\r\x00")))
def test_an_sbatch_argument_with_a_line_break_is_refused(value):
    with pytest.raises(escaping.LineBreak):
        escaping.sbatch_argument(value)


@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(WITH_BREAKS, st.one_of(WITH_BREAKS, st.lists(WITH_BREAKS, max_size=3),
                                                   st.dictionaries(HOSTILE, HOSTILE, max_size=2)), max_size=4))
def test_a_yaml_document_loads_back_as_its_data(data):
    assert yaml.safe_load(escaping.yaml_document(data)) == (data or {})


# ------------------------------------------------------------------ the sinks, fed scenario strings

def _slurm_request(run_dir: Path, value: str):
    options = {"partition": value, "account": value, "container_runtime": "apptainer", "container_image": value,
               "container_mounts": (f"{value}:/data",), "container_workdir": value, "extra_sbatch": (f"--comment={value}",)}
    spec = run_spec(launcher="slurm", launcher_options=options)
    return launch_request(spec, spec_file=run_dir / "spec.json", repo_root=Path(f"/repo {value}"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=HOSTILE.filter(bool), folder=HOSTILE.filter(lambda f: "/" not in f and f not in ("", ".", "..")))
def test_a_batch_script_reads_back_as_the_values_it_was_given(value, folder):
    request = _slurm_request(Path("/res") / folder / "runs" / "S1" / "0007", value)
    lines = launchers.get("slurm")(request).files[slurm.SCRIPT].splitlines()
    directives = [sbatch_arguments(line[len("#SBATCH"):]) for line in lines if line.startswith("#SBATCH")]
    assert [f"--partition={value}"] in directives and [f"--account={value}"] in directives
    assert [f"--comment={value}"] in directives and [f"--chdir=/repo {value}"] in directives
    assert [f"--output={request.run_dir}/slurm-%j.out"] in directives
    assert shlex.split(lines[-1]) == slurm.srun_argv(request)  # the ranks' command, word for word
    assert shlex.split(lines[len(directives) + 2]) == [f"ROSETTA_EXIT_FILE={request.run_dir}/job.exit"]
    assert lines[-1].startswith("srun ") and len(lines) == 1 + len(directives) + 6  # no line more than written


@pytest.mark.parametrize("where", ["folder", "option"])
def test_a_line_break_never_becomes_a_line_of_the_batch_script(where):
    """A results folder (or an option that got past the load check) holding a line break: the old script had
    the rest of it as a line of its own, run by bash; now it is one line naming the option."""
    bad = "x\ntouch /tmp/pwned"
    folder, value = (bad, "debug") if where == "folder" else ("res", bad)
    request = _slurm_request(Path("/res") / folder / "runs" / "S1" / "0007", value)
    with pytest.raises(UserError, match=r"^\[launcher_options.slurm\] [a-z_ ]+: holds a line break") as info:
        launchers.get("slurm")(request)
    assert "\n" not in str(info.value) and "touch" not in str(info.value)


@settings(max_examples=60, deadline=None)
@given(value=WITH_BREAKS, cwd=HOSTILE)
def test_sshs_remote_command_is_one_shell_line_of_the_same_words(value, cwd):
    argv = launchers.remote_argv(("ssh", "--", "node1"), Path("/w") / cwd, {"A": value, "B": "1"}, ("python", value))
    assert argv[:3] == ("ssh", "--", "node1") and len(argv) == 4
    assert shlex.split(argv[3]) == ["env", "-C", str(Path("/w") / cwd), f"A={value}", "B=1", "python", value]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=HOSTILE)
def test_a_manifest_loads_back_as_the_manifest(value):
    spec = run_spec(launcher="kubernetes", launcher_options={"image": f"registry.example/{value}"})
    request = launch_request(spec)
    files = launchers.get("kubernetes")(request).files
    from harness.launchers import kubernetes

    assert yaml.safe_load(files[kubernetes.MANIFEST]) == kubernetes.manifest(request)


def _pasted(message: str) -> list[list[str]]:
    """The commands a message gives between backticks or in parentheses after 'start them', as words."""
    import re

    return [shlex.split(c) for c in re.findall(r"`([^`]*)`", message)]


@pytest.mark.parametrize("path", ["/opt/my tools/netns_hosts.sh", "/opt/it's/netns_hosts.sh", "/opt/$(id)/x.sh"])
def test_a_pasted_command_is_one_word_per_value(monkeypatch, path):
    monkeypatch.setattr(hosts.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(hosts, "NETNS_SCRIPT", Path(path))
    with pytest.raises(UserError) as info:
        with hosts.namespace_hosts(3):
            pass
    inner = str(info.value).split("start them (", 1)[1].rsplit(") and name them", 1)[0]
    assert shlex.split(inner) == ["sudo", path, "start", "3"]
    monkeypatch.setattr(prerequisites, "INSTALLER", path)
    state = prerequisites.Check(root=True, missing_tools=("tc",), packages=("iproute2",), memory="")
    commands = _pasted(state.line())
    assert ["sudo", path] in commands and ["sudo", "apt-get", "install", "-y", "--no-install-recommends",
                                           "iproute2"] in commands
