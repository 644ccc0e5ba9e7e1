"""The framework images for real: built with podman from the local base (tools/container_images.py, cached in
podman's storage by their inputs) and benchmark runs inside them through the podman launcher, one container per
rank on the host's network. Skipped with the reason where podman is missing or not run as root.

First run on a 2-core machine: the base (~70 s) and each image (minutes: see docs/clusters.md); later runs find
them by their key and build nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import frameworks
from harness.experiment import scenario
from harness.launchers import LaunchRequest, framework_image, get, kubernetes, podman, slurm
from harness.running.runner import run_sweep
from tests.helpers import REPO
from tests.helpers.launch import launch_request, run_spec as spec

TOOL = REPO / "tools" / "container_images.py"
_spec = importlib.util.spec_from_file_location("container_images", TOOL)
container_images = importlib.util.module_from_spec(_spec)
sys.modules["container_images"] = container_images  # dataclasses look their module up
_spec.loader.exec_module(container_images)

UNAVAILABLE = container_images.unavailable_reason()
needs_podman = pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))

# ResNet-50 (the quickstart's first workload) at the tiny size, 2 ranks: a container per rank (a lone rank in
# one container adds no check the two do not make, and a launch costs 10-80 s here).
SCENARIO = """
name = "containers"
[settings]
warmup_steps = 1
measured_steps = 2
repeats = 1
timeout_s = 900
device = "cpu"
[matrix]
framework = "{framework}"
workload = "resnet50"
size = "tiny"
strategy = "{strategy}"
launcher = "podman"
procs_per_node = 2
batch_per_worker = 2
[launcher_options.podman]
image = "{image}"
"""


@pytest.fixture(scope="module")
def images():
    """name -> tag of the CPU image, built on first use (or found by its key)."""
    built: dict[str, str] = {}

    def image(name: str) -> str:
        if name not in built:
            built[name] = container_images.build(name)
        return built[name]

    return image


def _sweep(tmp_path: Path, framework: str, image: str, strategy: str = "allreduce") -> list[dict]:
    path = tmp_path / "scenario.toml"
    path.write_text(textwrap.dedent(SCENARIO.format(framework=framework, image=image, strategy=strategy)))
    return run_sweep(scenario.load(path), tmp_path / "results")




# The Horovod image compiles Horovod inside its build (against the image's own Open MPI and Python, so the
# host's cached wheel does not fit): over 30 minutes on a loaded 2-core machine. It runs where it is built
# already (podman's storage keeps it by its key: `python tools/container_images.py build horovod`), or when
# ROSETTA_CONTAINER_HOROVOD=1 asks for the build.
def _horovod_image_reason() -> str | None:
    if UNAVAILABLE is not None or os.environ.get("ROSETTA_CONTAINER_HOROVOD") == "1":
        return None
    if container_images.exists(container_images.tag("horovod")):
        return None
    return ("the Horovod image is not built here and builds Horovod from source (30+ min on 2 cores): "
            "`python tools/container_images.py build horovod` once, or set ROSETTA_CONTAINER_HOROVOD=1")


HOROVOD_SKIP = _horovod_image_reason()
HOROVOD_IMAGE = pytest.mark.skipif(HOROVOD_SKIP is not None, reason=str(HOROVOD_SKIP))


@needs_podman
@pytest.mark.parametrize("framework,strategy", [("torch_ddp", "allreduce"), ("torch_ddp", "onebit"),
                                                ("tf_mwms", "allreduce"), ("chainer", "allreduce"),
                                                pytest.param("horovod_torch", "allreduce", marks=HOROVOD_IMAGE),
                                                pytest.param("horovod_tf", "allreduce", marks=HOROVOD_IMAGE)])
def test_runs_inside_the_frameworks_image_on_two_containers(images, tmp_path, framework, strategy):
    image = images(frameworks.get(framework).image_name)
    rows = _sweep(tmp_path, framework, image, strategy)
    assert [r["status"] for r in rows] == ["ok"], [r.get("reason") for r in rows]
    facts = podman.inspect(image)
    for row in rows:
        assert row["image"] == image and row["image_id"] == facts["id"] and row["image_id"].startswith("sha256:")
        assert row["launcher"] == "podman" and row["throughput"] > 0
        assert row["weights_consistent"] is True  # the same weights on every rank, each in its own container
        containers = row["world_size"] if frameworks.get(framework).container_per_rank else 1  # MPI's ranks share one
        assert len(json.loads(row["hosts"])) == containers
        assert row["samples_measured"] == row["world_size"] * 2 * 2


@needs_podman
def test_a_broken_image_gives_a_failed_row_naming_the_image_and_the_import_error(images, tmp_path):
    """An image whose framework does not import (torch's package replaced by one that raises)."""
    broken = "localhost/rosetta/broken-torch:test"
    dockerfile = tmp_path / "Containerfile"
    dockerfile.write_text(f"FROM {images('torch')}\nRUN echo 'raise ImportError(\"torch broken on purpose\")' > "
                          "\"$(python -c 'import site; print(site.getsitepackages()[0])')/torch/__init__.py\"\n")
    if not container_images.exists(broken):
        container_images.podman("build", "-t", broken, "-f", str(dockerfile), str(tmp_path))
    rows = _sweep(tmp_path, "torch_ddp", broken)
    for row in rows:
        assert row["status"] == "failed", row
        assert broken in row["reason"] and "torch broken on purpose" in row["reason"], row["reason"]
        assert row["image_id"] == podman.inspect(broken)["id"]
        assert row["launch_s"] < 120  # not a hang until the timeout


def _request(framework: str, launcher: str, **options) -> LaunchRequest:
    return launch_request(spec(framework=framework, launcher=launcher, launcher_options=options, procs_per_node=2),
                          cpu_count=4, repo_root=Path("."))


@pytest.mark.parametrize("framework", [n for n in frameworks.names() if frameworks.get(n).container_per_rank])
def test_podman_kubernetes_and_slurm_name_the_same_image(framework):
    declared = frameworks.get(framework).image
    command = get("podman")(_request(framework, "podman"))
    for argv in (command.argv, *command.also):
        assert argv[:3] == ("podman", "run", "--rm") and "--network" in argv and argv[argv.index("--network") + 1] == "host"
        assert f"ROSETTA_IMAGE={declared}" in argv
        assert "/res:/res" in argv  # the results folder where the harness sees it: spec in, records out
    ranks = [next(a for a in argv if a.startswith("RANK=")) for argv in (command.argv, *command.also)]
    assert ranks == ["RANK=0", "RANK=1"]
    assert json.loads(command.files["image.json"])["image"] == declared
    assert kubernetes.image(_request(framework, "kubernetes")) == declared
    assert slurm.container_image(_request(framework, "slurm", container_runtime="pyxis")) == declared
    assert framework_image(_request(framework, "podman", image="x/y:1"), "x/y:1") == "x/y:1"


@pytest.mark.parametrize("framework", [n for n in frameworks.names() if not frameworks.get(n).container_per_rank])
def test_mpi_frameworks_run_their_own_launcher_inside_one_container(framework):
    command = get("podman")(_request(framework, "podman"))
    assert command.also == ()
    argv = command.argv
    inner = argv[argv.index("--init") + 1:]
    default = frameworks.get(framework).launcher
    assert ("mpirun" in inner) if default == "mpirun" else ("harness.launchers.horovodrun.entry" in inner)
    assert "python" in inner and "/venv/bin/python" not in inner  # the image's interpreter, not the harness's


def test_the_cpu_build_arguments_are_the_dockerfiles_arguments():
    for image in container_images.IMAGES.values():
        text = (container_images.REPO / image.dockerfile).read_text()
        for name in ("BASE_IMAGE", *image.build_args):
            assert f"ARG {name}=" in text, f"{image.dockerfile} has no ARG {name}"


def test_image_keys_change_with_their_inputs(monkeypatch):
    settings = {"find-links": "/nonexistent"}
    torch = container_images.IMAGES["torch"]
    key = container_images.image_key(torch, settings)
    assert key == container_images.image_key(torch, dict(settings))
    assert container_images.image_key(torch, {"find-links": "/elsewhere"}) != key
    other = container_images.Image("torch", torch.dockerfile, {**torch.build_args, "TORCH_INDEX": "x"})
    assert container_images.image_key(other, settings) != key
    monkeypatch.setattr(container_images, "BASE_PACKAGES", (*container_images.BASE_PACKAGES, "vim"))
    assert container_images.image_key(torch, settings) != key  # the base's package list


def test_the_apt_sources_become_mmdebstrap_mirrors(tmp_path, monkeypatch):
    listing = tmp_path / "sources.list.d"
    listing.mkdir()
    (listing / "debian.sources").write_text(textwrap.dedent("""\
        Types: deb
        URIs: http://deb.debian.org/debian
        Suites: bookworm bookworm-updates
        Components: main

        Types: deb
        URIs: https://deb.nodesource.com/node_20.x
        Suites: nodistro
        Components: main
        """))
    (listing / "old.list").write_text("deb http://mirror.example/debian-security bookworm-security main\n")
    monkeypatch.setattr(container_images, "SOURCES", (tmp_path / "sources.list", listing))
    assert container_images.apt_sources() == ["deb http://deb.debian.org/debian bookworm main",
                                              "deb http://deb.debian.org/debian bookworm-updates main",
                                              "deb http://mirror.example/debian-security bookworm-security main"]


def test_pip_settings_name_the_folders_to_mount(tmp_path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "index" / "simple").mkdir(parents=True)
    settings = {"find-links": str(tmp_path / "wheels"), "extra-index-url": f"file://{tmp_path}/index/simple",
                "default-timeout": "180", "index-url": "https://pypi.org/simple"}
    assert container_images.local_paths(settings) == [tmp_path / "index", tmp_path / "wheels"]
    assert "find-links = " + str(tmp_path / "wheels") in container_images.pip_conf(settings)


@needs_podman
def test_the_tool_prints_an_images_tag():
    done = subprocess.run([sys.executable, str(TOOL), "tag", "torch"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("localhost/rosetta/torch:cpu-")
