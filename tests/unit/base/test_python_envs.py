"""A framework family's own Python environment (harness/base/python_envs.py): its pins, key, place, interpreter,
lock and modules found on disk; the launchers start its ranks with its interpreter; tools/make_env.py leaves a
made one alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness import launchers
from harness.base import python_envs
from harness.base.errors import UserError
from harness.contract.axes import Workload
from harness.contract.framework_api import FrameworkInfo
from tests.helpers import REPO
from tests.helpers.launch import launch_request, run_spec

PINS = "# a family\nalpha==1.2.0\nbeta==2.0  # why\n\n"


@pytest.fixture
def envs(tmp_path, monkeypatch):
    """A pins folder with one environment, ``fam``, and an empty cache of made environments."""
    pins = tmp_path / "pins"
    pins.mkdir()
    (pins / "fam.txt").write_text(PINS)
    monkeypatch.setattr(python_envs, "PINS_DIR", pins)
    monkeypatch.setenv("ROSETTA_ENVS", str(tmp_path / "cache"))
    return tmp_path


def made(name: str, modules: tuple[str, ...] = ()) -> Path:
    """Environment ``name`` laid out as tools/make_env.py leaves it, with ``modules`` as packages."""
    place = python_envs.location(name)
    site = place / "lib" / "python3.11" / "site-packages"
    for module in modules:
        (site / module).mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
    site.mkdir(parents=True, exist_ok=True)
    (place / python_envs.MADE).write_text("")
    return place


def test_the_pins_are_read_without_comments_and_each_pins_one_version(envs):
    assert python_envs.pins("fam") == ("alpha==1.2.0", "beta==2.0")
    with pytest.raises(UserError, match=r"x\.txt: 'gamma>=1': every line pins one version"):
        python_envs.parse_pins("gamma>=1\n", "x.txt")
    with pytest.raises(UserError, match=r"environment 'nope': no pins file .*\(known: fam\)"):
        python_envs.pins("nope")


def test_the_key_follows_the_pins_and_the_python_not_their_order():
    one = python_envs.key(("a==1", "b==2"), (3, 11))
    assert one == python_envs.key(("B==2", "a==1"), (3, 11)) and len(one) == 16
    assert one != python_envs.key(("a==1", "b==3"), (3, 11))
    assert one != python_envs.key(("a==1", "b==2"), (3, 12))


def test_an_environment_lies_in_the_cache_under_its_key_and_is_made_only_once_marked(envs):
    place = python_envs.location("fam")
    assert place == envs / "cache" / f"fam-{python_envs.key(python_envs.pins('fam'))}"
    assert python_envs.interpreter("fam") == place / "bin" / "python"
    assert not python_envs.is_made("fam") and "make envs" in python_envs.not_made_reason("fam")
    assert python_envs.missing_modules("fam", ["alpha"]) == ["alpha"]  # not made: nothing is there
    made("fam", ("alpha",))
    assert python_envs.is_made("fam") and python_envs.not_made_reason("fam") is None
    assert python_envs.missing_modules("fam", ["alpha", "beta", "alpha.sub"]) == ["beta"]


def test_the_lock_and_the_rows_fields(envs):
    pins = python_envs.pins("fam")
    assert python_envs.row_fields("fam") == {"environment": "fam",
                                            "environment_lock": f"{python_envs.key(pins)} alpha==1.2.0 beta==2.0"}
    main = python_envs.row_fields(None)
    assert main["environment"] == ".venv" and main["environment_lock"].endswith(" pyproject.toml")


def test_a_framework_in_its_own_environment_finds_its_modules_there_not_here(envs):
    info = FrameworkInfo(name="f", title="F", launchers=("mpirun",), worker_module="frameworks.f.worker",
                         requires=("alpha", "pytest"), workloads=(Workload.RESNET50,), strategies=(), storage=(),
                         devices=(), image="i", dockerfile="d", environment="fam")
    made("fam", ("alpha",))
    assert info.missing_modules() == ["pytest"]  # importable here, absent there


@pytest.mark.parametrize("launcher", ["torchrun", "mpirun", "horovodrun", "slurm"])
def test_every_rank_starts_with_its_familys_interpreter_and_finds_the_harness(launcher, tmp_path):
    request = launch_request(run_spec(launcher=launcher), worker_python="/envs/jax-k/bin/python",
                             spec_file=tmp_path / "runs" / "S" / "0000" / "spec.json")
    command = launchers.get(launcher)(request)
    text = " ".join([*command.argv, *command.files.values()])
    assert "/envs/jax-k/bin/python -m harness.contract.worker" in text
    assert launchers.worker_env(request)["PYTHONPATH"] == "/repo"
    same = launch_request(run_spec(launcher=launcher))
    assert "PYTHONPATH" not in launchers.worker_env(same) and same.rank_python == same.python


def test_a_made_environment_is_not_made_again(envs, monkeypatch):
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import make_env
    finally:
        sys.path.remove(str(REPO / "tools"))
    place = made("fam")
    monkeypatch.setattr(make_env, "_install", lambda *a: pytest.fail("a made environment was installed again"))
    assert make_env.make("fam") == place
