"""tools/install_horovod.py's pure parts: the wheel cache key and the reading of horovodrun --check-build
(no download, no build)."""

import importlib.util

from tests.helpers import REPO

TOOL = REPO / "tools" / "install_horovod.py"
_spec = importlib.util.spec_from_file_location("install_horovod", TOOL)
install_horovod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install_horovod)

BASE = dict(patch_text=install_horovod.PATCH.read_text(), python="cpython-3.11.7-linux-x86_64",
            torch="2.13.0+cpu", tensorflow="2.21.0", mpi="mpicc: Open MPI 4.1.4 (Language: C)",
            compiler="c++ (Debian 12.2.0-14+deb12u1) 12.2.0")


def key(**changes):
    return install_horovod.cache_key(install_horovod.build_inputs(**{**BASE, **changes}))


def test_the_key_is_stable_and_short():
    assert key() == key()
    assert len(key()) == 16 and int(key(), 16) >= 0


def test_the_key_changes_with_every_build_input():
    assert key(patch_text=BASE["patch_text"] + "\n# one more line\n") != key()
    assert key(torch="2.13.1+cpu") != key()
    for field, other in [("tensorflow", "2.20.0"), ("python", "cpython-3.12.1-linux-x86_64"),
                         ("mpi", "mpicc: Open MPI 5.0.3 (Language: C)"), ("compiler", "c++ 13.2.0"),
                         ("horovod", "0.28.0"), ("build_env", {"HOROVOD_WITH_MPI": "0"})]:
        assert key(**{field: other}) != key(), field


def test_the_patch_is_what_the_issue_describes():
    text = install_horovod.PATCH.read_text()
    assert "-set(CMAKE_CXX_STANDARD 14)\n+set(CMAKE_CXX_STANDARD 17)" in text  # top-level CMakeLists.txt
    assert "-    set(CMAKE_CXX_STANDARD 14)\n+    set(CMAKE_CXX_STANDARD 17)" in text  # horovod/torch
    assert '-list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")' in text


CHECK_BUILD = """Horovod v0.28.1:

Available Frameworks:
    [X] TensorFlow
    [X] PyTorch
    [ ] MXNet

Available Controllers:
    [X] MPI
    [X] Gloo

Available Tensor Operations:
    [ ] NCCL
    [X] MPI
    [X] Gloo
"""


def test_check_build_reading():
    assert install_horovod.check_build_missing(CHECK_BUILD) == []
    without_mpi = CHECK_BUILD.replace("    [X] MPI\n    [X] Gloo\n\nAvailable Tensor",
                                      "    [ ] MPI\n    [X] Gloo\n\nAvailable Tensor")
    assert install_horovod.check_build_missing(without_mpi) == ["Controllers: MPI"]
    assert install_horovod.check_build_missing("") == ["Frameworks: TensorFlow", "Frameworks: PyTorch",
                                                       "Controllers: MPI", "Controllers: Gloo"]


def test_a_gpu_build_joins_the_key_and_must_tick_nccl():
    assert install_horovod.build_settings({}) == install_horovod.BUILD_ENV  # a CPU machine: the key as before
    gpu = install_horovod.build_settings({"HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_BUILD_CUDA_CC_LIST": "80,90",
                                          "HOROVOD_WITH_MXNET": "1"})  # not a GPU setting: BUILD_ENV's stands
    assert gpu == {**install_horovod.BUILD_ENV, "HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_BUILD_CUDA_CC_LIST": "80,90"}
    assert key(build_env=gpu) != key()
    assert install_horovod.check_build_missing(CHECK_BUILD, install_horovod.required_build(gpu)) == [
        "Tensor Operations: NCCL"]
    with_nccl = CHECK_BUILD.replace("[ ] NCCL", "[X] NCCL")
    assert install_horovod.check_build_missing(with_nccl, install_horovod.required_build(gpu)) == []


def _toolkit(root, nccl=True):
    """A CUDA toolkit's layout (nvcc, and NCCL's header and library where ``nccl``), empty files."""
    for path in ["bin/nvcc", *(["include/nccl.h", "lib64/libnccl.so"] if nccl else [])]:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")
    return root


def test_a_cuda_toolkit_with_nccl_and_a_cuda_torch_builds_nccl_operations(tmp_path):
    toolkit = _toolkit(tmp_path / "cuda")
    none = lambda name: None  # noqa: E731 - nothing on PATH
    found, note = install_horovod.detected_gpu_settings({"CUDA_HOME": str(toolkit)}, none, lambda: "12.6")
    assert found == {"HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_CUDA_HOME": str(toolkit)} and "NCCL" in note
    settings = install_horovod.build_settings({}, found)
    assert install_horovod.required_build(settings)["Tensor Operations"] == ("NCCL",)  # --check then needs NCCL
    # the environment's own settings win, and ROSETTA_HOROVOD_GPU=0 keeps a CPU build
    assert install_horovod.detected_gpu_settings({"CUDA_HOME": str(toolkit), "HOROVOD_GPU_OPERATIONS": "NCCL"},
                                                 none, lambda: "12.6") == ({}, None)
    assert install_horovod.detected_gpu_settings({"CUDA_HOME": str(toolkit), "ROSETTA_HOROVOD_GPU": "0"},
                                                 none, lambda: "12.6") == ({}, None)
    # nvcc found on PATH: its toolkit; NCCL elsewhere, named by HOROVOD_NCCL_HOME
    bare = _toolkit(tmp_path / "bare", nccl=False)
    nccl = _toolkit(tmp_path / "nccl")
    found, _ = install_horovod.detected_gpu_settings({"HOROVOD_NCCL_HOME": str(nccl)},
                                                     lambda name: str(bare / "bin" / "nvcc"), lambda: "12.6")
    assert found == {"HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_CUDA_HOME": str(bare), "HOROVOD_NCCL_HOME": str(nccl)}


def test_a_toolkit_without_nccl_or_a_cpu_torch_stays_a_cpu_build_and_says_why(tmp_path):
    bare = _toolkit(tmp_path / "bare", nccl=False)
    found, note = install_horovod.detected_gpu_settings({"CUDA_HOME": str(bare)}, lambda name: None, lambda: "12.6")
    assert found == {} and "no NCCL" in note and "libnccl-dev" in note
    found, note = install_horovod.detected_gpu_settings({"CUDA_HOME": str(_toolkit(tmp_path / "cuda"))},
                                                        lambda name: None, lambda: None)
    assert found == {} and "CPU build" in note
