"""Build the framework images (docker/*.Dockerfile) with podman on a machine without a container registry.

    python tools/container_images.py base                 # the local base image (Debian minbase + Python)
    python tools/container_images.py build [NAME ...]     # the CPU images (torch, tensorflow, horovod, chainer)
    python tools/container_images.py tag NAME             # print the local tag of an image (building nothing)
    python tools/container_images.py pip-mounts DIR       # podman options giving a container this pip's settings

The base image is made with mmdebstrap from this machine's configured Debian mirror (its apt sources) and
imported with ``podman import``: no registry is asked for anything. Each Dockerfile takes its base as the
build argument ``BASE_IMAGE`` (default: the real CUDA or Python base, for clusters); here it is the local
base, with the CPU builds of the frameworks (``CPU_BUILD_ARGS``).

pip inside a build sees this machine's pip settings (``pip config list`` and ``PIP_*``): they are written
into one pip.conf mounted at ``/etc/pip.conf`` for the build's RUN steps, and every local folder or file
they name (``find-links``, ``file://`` indexes, constraints, the CA bundle) is mounted read-only at the
same path, so torch 2.13.0 comes as the CPU wheel the host installs, not PyPI's multi-GB CUDA build.
Horovod's wheel cache (``~/.cache/rosetta/horovod``) is mounted too: ``tools/install_horovod.py`` builds once.

Images are tagged by a key that hashes what they are made from (the base's key, the Dockerfile, the build
arguments, ``pyproject.toml``, the pip settings and the files they name, the tools the build runs), and kept in
podman's own storage (outside the clone): a build whose tag exists is skipped, so a second CI run builds
nothing. Podman runs with ``tools/containers.conf`` (``CONTAINERS_CONF``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, whether run as a script or loaded by path
import install_packages  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CONTAINERS_CONF = REPO / "tools" / "containers.conf"
KEY_FORMAT = 1  # bump when the meaning of a key's inputs changes
INIT = Path("/usr/libexec/podman/catatonit")  # what `podman run --init` starts (Debian's catatonit)
SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
SUITE = "bookworm"  # Debian 12: Python 3.11, as pyproject.toml's pins and the Dockerfiles' PYTHON_VERSION
# Python (python3-venv: the images' /opt/venv; python-is-python3: the Dockerfiles call `python`), a compiler
# and make (builds from sdists, the fresh-machine check), git. Everything else an image needs it installs itself.
BASE_PACKAGES = ("ca-certificates", "g++", "git", "make", "python-is-python3", "python3", "python3-dev",
                 "python3-venv")
BASE_REPOSITORY = "localhost/rosetta/base"
HOROVOD_CACHE = Path(os.environ.get("ROSETTA_HOROVOD_CACHE", Path.home() / ".cache" / "rosetta" / "horovod"))
IN_BUILD_HOROVOD_CACHE = "/root/.cache/rosetta/horovod"


@dataclass(frozen=True)
class Image:
    """One framework image: its Dockerfile and the build arguments of its CPU variant."""

    name: str
    dockerfile: str
    build_args: dict[str, str] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()  # further repository files the build runs (part of the key)


CPU_TORCH = {"TORCH_INDEX": "https://pypi.org/simple"}  # the CPU wheel then comes from the find-links folder
CPU_TF = {"TENSORFLOW": "tensorflow-cpu", "TF_EXTRA": "tf"}
IMAGES = {
    "torch": Image("torch", "docker/torch.Dockerfile", CPU_TORCH),
    "tensorflow": Image("tensorflow", "docker/tensorflow.Dockerfile", CPU_TF),
    "horovod": Image("horovod", "docker/horovod.Dockerfile",
                     {**CPU_TORCH, **CPU_TF, "HOROVOD_GPU_OPERATIONS": "",
                      "HOROVOD_BUILD_CUDA_CC_LIST": "", "HOROVOD_CACHE": IN_BUILD_HOROVOD_CACHE},
                     ("tools/install_horovod.py", "tools/horovod-0.28.1.patch")),
    "chainer": Image("chainer", "docker/chainer.Dockerfile", {}, ("tools/build-constraints.txt",)),
    "jax": Image("jax", "docker/jax.Dockerfile", {}, ("tools/envs/jax.txt",)),
}


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def podman(*args: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], env=podman_env(), check=check, text=True,
                          capture_output=capture, stdin=subprocess.DEVNULL)


def unavailable_reason() -> str | None:
    """Why images cannot be built or run here, or None."""
    if shutil.which("podman") is None:
        return "podman not installed (apt-get install podman buildah runc uidmap fuse-overlayfs catatonit)"
    if not INIT.exists():  # the podman launcher's --init runs it
        return f"podman run --init needs {INIT} (apt-get install catatonit)"
    if os.geteuid() != 0:
        return "podman here runs as root only (rootless needs subuid ranges this machine has not set up)"
    return None


def _key(*parts: object) -> str:
    text = json.dumps([KEY_FORMAT, *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def apt_sources() -> list[str]:
    """This machine's Debian mirrors for SUITE as one-line ``deb URI SUITE COMPONENTS`` entries (deb822
    ``.sources`` and one-line ``.list`` files; entries of other suites or disabled files are left out)."""
    files = [SOURCES[0]] + sorted(SOURCES[1].glob("*")) if SOURCES[1].is_dir() else [SOURCES[0]]
    lines = []
    for path in files:
        if not path.is_file() or path.suffix not in (".list", ".sources"):
            continue
        text = path.read_text()
        if path.suffix == ".list":
            lines += [line.strip() for line in text.splitlines() if line.strip().startswith("deb ")]
            continue
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, re.MULTILINE))
            if "deb" not in fields.get("Types", "").split() or fields.get("Enabled", "yes") == "no":
                continue
            lines += [f"deb {uri} {suite} {fields.get('Components', 'main')}"
                      for uri in fields.get("URIs", "").split() for suite in fields.get("Suites", "").split()]
    return [line for line in lines if line.split()[2].split("-")[0] == SUITE]


def base_key() -> str:
    return _key("base", SUITE, apt_sources(), BASE_PACKAGES)


def base_tag() -> str:
    return f"{BASE_REPOSITORY}:{base_key()}"


def exists(tag: str) -> bool:
    return podman("image", "exists", tag, check=False).returncode == 0


def build_base(log=sys.stderr) -> str:
    """The local base image (made once per key): mmdebstrap minbase from the configured mirror, imported."""
    tag = base_tag()
    if exists(tag):
        return tag
    sources = apt_sources()
    if not sources:
        raise SystemExit(f"no Debian {SUITE} mirror in {SOURCES[0]} or {SOURCES[1]}: mmdebstrap needs one")
    with tempfile.TemporaryDirectory(prefix="rosetta-base-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        argv = ["mmdebstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(rootfs),
                *sources]
        print("+", " ".join(argv), file=log, flush=True)
        subprocess.run(argv, check=True, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        podman("import", "--change", "CMD [\"/bin/bash\"]", "--change", "ENV LANG=C.UTF-8", str(rootfs), tag)
    return tag


def pip_settings() -> dict[str, str]:
    """This machine's pip settings (files and ``PIP_*``, as the set-up's installer reads them): name -> value."""
    return install_packages.read_pip_settings()


def local_paths(settings: dict[str, str]) -> list[Path]:
    """The local files and folders pip settings name (paths and ``file://`` URLs), which exist here."""
    paths = set()
    for value in settings.values():
        for word in value.split():
            path = Path(word.removeprefix("file://"))
            if path.is_absolute() and path.exists():
                # an index's simple/ page links to files beside it: mount the index's parent folder
                paths.add(path.parent if path.name == "simple" else path)
    return sorted(paths)


def pip_conf(settings: dict[str, str]) -> str:
    return "[global]\n" + "".join(f"{name} = {value}\n" for name, value in sorted(settings.items()))


def pip_mounts(settings: dict[str, str], folder: Path) -> list[str]:
    """``--volume`` values that give a container this machine's pip settings: a pip.conf written into
    ``folder`` mounted as ``/etc/pip.conf``, and the local folders and files it names, read-only."""
    conf = folder / "pip.conf"
    conf.write_text(pip_conf(settings))
    return [f"{conf}:/etc/pip.conf:ro", *(f"{p}:{p}:ro" for p in local_paths(settings))]


def listing(path: Path) -> list[str]:
    """What a mounted folder holds, for the key (names and sizes of its top level)."""
    if path.is_file():
        return [f"{path}:{path.stat().st_size}:{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"]
    return sorted(f"{p.name}:{p.stat().st_size}" for p in path.iterdir())


def image_key(image: Image, settings: dict[str, str]) -> str:
    files = [image.dockerfile, "pyproject.toml", *image.inputs]
    return _key(base_key(), image.build_args, settings, [listing(p) for p in local_paths(settings)],
                {f: (REPO / f).read_text() for f in files})


def tag(name: str, settings: dict[str, str] | None = None) -> str:
    """The local tag of a framework image's CPU variant: localhost/rosetta/<name>:cpu-<key>."""
    image = IMAGES[name]
    return f"localhost/rosetta/{name}:cpu-{image_key(image, pip_settings() if settings is None else settings)}"


def build(name: str, log=sys.stderr) -> str:
    """Build (or find in podman's storage) the CPU image ``name``; returns its tag."""
    settings = pip_settings()
    image, wanted = IMAGES[name], tag(name, settings)
    if exists(wanted):
        return wanted
    base = build_base(log)
    with tempfile.TemporaryDirectory(prefix="rosetta-build-") as tmp:
        mounts = pip_mounts(settings, Path(tmp))
        if "HOROVOD_CACHE" in image.build_args:
            HOROVOD_CACHE.mkdir(parents=True, exist_ok=True)
            mounts.append(f"{HOROVOD_CACHE}:{image.build_args['HOROVOD_CACHE']}")
        args = {"BASE_IMAGE": base, **image.build_args}
        argv = ["build", "--network", "host", "-f", image.dockerfile, "-t", wanted,
                "--label", f"org.rosetta.key={wanted.rsplit(':', 1)[1]}",
                *(a for k, v in args.items() for a in ("--build-arg", f"{k}={v}")),
                *(a for m in mounts for a in ("--volume", m)), "."]
        print("+ podman", " ".join(argv), file=log, flush=True)
        done = subprocess.run(["podman", *argv], cwd=REPO, env=podman_env(), stdout=log, stderr=log,
                              stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        podman("image", "prune", "-f", check=False)  # a failed build leaves its layers
        raise SystemExit(f"podman build of {image.dockerfile} failed (exit {done.returncode})")
    return wanted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("base")
    built = sub.add_parser("build")
    built.add_argument("names", nargs="*", metavar="NAME", help=f"of {sorted(IMAGES)} (default: all)")
    named = sub.add_parser("tag")
    named.add_argument("name", choices=list(IMAGES))
    mounts = sub.add_parser("pip-mounts", help="write DIR/pip.conf; print the --volume options, one a line")
    mounts.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    reason = unavailable_reason()
    if reason and args.verb in ("base", "build"):
        raise SystemExit(reason)
    unknown = set(getattr(args, "names", ())) - set(IMAGES)
    if unknown:
        parser.error(f"no image {sorted(unknown)}: the images are {sorted(IMAGES)}")
    if args.verb == "base":
        print(build_base())
    elif args.verb == "tag":
        print(tag(args.name))
    elif args.verb == "pip-mounts":
        print("\n".join(a for m in pip_mounts(pip_settings(), args.folder) for a in ("--volume", m)))
    else:
        for name in args.names or IMAGES:
            print(build(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
