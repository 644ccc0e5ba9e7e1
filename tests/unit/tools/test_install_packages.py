"""tools/install_packages.py: pip's settings read and handed to uv, and real installs by uv and by pip
from a folder of wheels (no index, nothing downloaded)."""

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO

TOOL = REPO / "tools" / "install_packages.py"
_spec = importlib.util.spec_from_file_location("install_packages", TOOL)
install_packages = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install_packages)

CONFIG_LIST = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.find-links='/opt/wheels'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/srv/other'
global.timeout='60'
install.timeout='90'
"""


def test_pip_settings_take_the_variables_over_the_install_section_over_global():
    settings = install_packages.pip_settings(CONFIG_LIST)
    assert settings == {"cert": "/etc/ssl/certs/ca-certificates.crt", "find-links": "/opt/wheels",
                        "constraint": "/etc/xdg/pip/constraints.txt", "timeout": "90",
                        "extra-index-url": "file:///opt/pypi/simple file:///opt/pypi-more/simple"}


def test_uv_gets_every_index_setting_in_its_own_words(monkeypatch):
    for name in ("UV_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_CONSTRAINT", "SSL_CERT_FILE", "UV_HTTP_TIMEOUT",
                 "UV_INDEX_STRATEGY", "UV_SYSTEM_CERTS"):
        monkeypatch.delenv(name, raising=False)
    settings = {**install_packages.pip_settings(CONFIG_LIST), "find-links": "/opt/wheels /srv/more"}
    env, untranslated = install_packages.uv_environment(settings)
    assert untranslated is None
    assert env == {"UV_INDEX_STRATEGY": "unsafe-best-match", "UV_SYSTEM_CERTS": "1",
                   "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
                   "UV_FIND_LINKS": "/opt/wheels,/srv/more",  # uv's list is comma-separated, pip's by spaces
                   "UV_CONSTRAINT": "/etc/xdg/pip/constraints.txt", "UV_HTTP_TIMEOUT": "90",
                   "UV_EXTRA_INDEX_URL": "file:///opt/pypi/simple file:///opt/pypi-more/simple"}


def test_a_uv_variable_the_user_set_is_theirs(monkeypatch):
    monkeypatch.setenv("UV_INDEX_STRATEGY", "first-index")
    env, _ = install_packages.uv_environment({"index-url": "https://mirror.example/simple"})
    assert "UV_INDEX_STRATEGY" not in env and env["UV_INDEX_URL"] == "https://mirror.example/simple"


def test_a_setting_uv_has_no_word_for_is_named():
    env, untranslated = install_packages.uv_environment({"cert": "/x.pem", "client-cert": "/me.pem"})
    assert (env, untranslated) == ({}, "client-cert")
    assert install_packages.uv_environment({"no-index": "true", "quiet": "1"})[0]["UV_NO_INDEX"] == "1"


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel of one module, ``name``, that knows its version."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as whl:
        for arcname, text in files.items():
            whl.writestr(arcname, text)
        whl.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"]))
    return path


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory):
    """A new virtual environment (with pip) and a folder holding one wheel, named by a pip config file
    that allows no index: everything these installs fetch is on this disk."""
    root = tmp_path_factory.mktemp("install")
    (root / "wheels").mkdir()
    _wheel(root / "wheels", "rosetta_demo", "1.0")
    subprocess.run([sys.executable, "-m", "venv", root / "venv"], check=True)
    return root


def _install(root: Path, config: str) -> subprocess.CompletedProcess:
    (root / "pip.conf").write_text(config.format(wheels=root / "wheels"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env["PIP_CONFIG_FILE"] = str(root / "pip.conf")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # this suite's uv
    python = root / "venv" / "bin" / "python"
    subprocess.run([python, "-m", "pip", "uninstall", "--yes", "--quiet", "rosetta_demo"], env=env)
    done = subprocess.run([python, TOOL, "--quiet", "rosetta_demo==1.0"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    version = subprocess.run([python, "-c", "import rosetta_demo; print(rosetta_demo.VERSION)"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "1.0"
    return done


@pytest.mark.runs
def test_uv_installs_from_where_pip_is_told_to_look_and_compiles_the_bytecode(fresh_env):
    if shutil.which("uv", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("uv not installed in this environment (make installs it; pip install uv)")
    done = _install(fresh_env, "[global]\nno-index = true\nfind-links = {wheels}\n")
    assert "installing with pip" not in done.stderr
    cached = list((fresh_env / "venv" / "lib").glob("python3*/site-packages/rosetta_demo/__pycache__/*.pyc"))
    assert cached, "uv did not compile the bytecode"


@pytest.mark.runs
def test_pip_installs_where_pip_is_set_up_with_something_uv_lacks(fresh_env):
    done = _install(fresh_env, "[global]\nno-index = true\nfind-links = {wheels}\nsrc = /tmp/unused-src\n")
    assert "installing with pip: pip's setting 'src' has no uv equivalent" in done.stderr
