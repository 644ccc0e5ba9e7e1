"""TensorFlow process set-up shared by the TensorFlow workers: threads, device, versions, sync.

Everything here must run before TensorFlow's runtime starts (before the first op), which is why
the workers call it first.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Callable, Mapping

import keras
import numpy as np
import tensorflow as tf

from harness.contract.axes import Device, Precision

INTER_OP_THREADS = 2  # independent ops at once; more only oversubscribes the cores a rank is given
# Keras mixed-precision policies: layers compute in the low precision, variables stay float32, the
# losses are computed in float32 (training.loss_of). float16 adds loss scaling (training.with_loss_scaling).
POLICIES = {Precision.FP32: "float32", Precision.TF32: "float32", Precision.AMP_FP16: "mixed_float16",
            Precision.AMP_BF16: "mixed_bfloat16"}


def configure_threads(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """Intra-op threads = the rank's share of the node's cores, which every launcher passes as
    OMP_NUM_THREADS (harness.launchers.worker_env); TensorFlow would otherwise take every core in
    every rank and oversubscribe the node ``procs_per_node`` times."""
    env = os.environ if env is None else env
    intra = int(env.get("OMP_NUM_THREADS") or 0) or max(
        1, (os.cpu_count() or 1) // int(env.get("LOCAL_WORLD_SIZE", "1")))
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(INTER_OP_THREADS)
    return {"intra_op_threads": intra, "inter_op_threads": INTER_OP_THREADS}


def resolve_device(requested: Device, local_rank: int) -> str:
    """"cpu" or "cuda"; on a GPU node each rank sees only its own GPU (local rank)."""
    gpus = tf.config.list_physical_devices("GPU")
    if requested == Device.CUDA and not gpus:
        raise RuntimeError("device cuda requested but TensorFlow sees no GPU "
                           "(tensorflow-cpu is installed, or no CUDA driver)")
    if requested == Device.CPU or not gpus:
        tf.config.set_visible_devices([], "GPU")
        return "cpu"
    gpu = gpus[local_rank % len(gpus)]
    tf.config.set_visible_devices([gpu], "GPU")
    tf.config.experimental.set_memory_growth(gpu, True)
    return "cuda"


def device_sync(device_kind: str) -> Callable[[], None]:
    """Wait for the device's queued work (GPU kernels run asynchronously); a no-op on CPU."""
    if device_kind == "cuda":
        return tf.test.experimental.sync_devices
    return lambda: None


def gpu_facts(device_kind: str) -> dict[str, object]:
    if device_kind != "cuda":
        return {"gpu_model": None, "gpu_count": 0}
    details = tf.config.experimental.get_device_details(tf.config.get_visible_devices("GPU")[0])
    return {"gpu_model": details.get("device_name"), "gpu_count": len(tf.config.list_physical_devices("GPU"))}


def versions() -> dict[str, str]:
    found = {"tensorflow": tf.__version__, "keras": keras.__version__, "python": platform.python_version()}
    build = tf.sysconfig.get_build_info()
    for key in ("cuda_version", "cudnn_version"):
        if build.get(key):
            found[key.split("_")[0]] = str(build[key])
    return found


def dense_bytes(variables) -> int:
    """Bytes of every trainable variable's gradient: what fp32 allreduce sends per step."""
    return int(sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables))


def precision_unavailable(precision: Precision, device_kind: str) -> str | None:
    """Why this rank cannot train at ``precision`` on the device it found, or None. The harness refuses
    a GPU-only precision with device = "cpu" before launching; with device = "auto" the worker finds out."""
    if precision.needs_cuda and device_kind != "cuda":
        return f"precision {precision.value} needs a CUDA GPU; none found"
    return None


def set_precision(precision: Precision) -> dict[str, object]:
    """The Keras dtype policy of the models built after this call (before building them) and TF32.

    TensorFlow allows TensorFloat-32 in float32 matmuls and convolutions by default on Ampere and later
    GPUs, so fp32 would silently be tf32 there: it is on only for tf32 (and off under the mixed
    policies, as in torch_ddp). Returns what is now in force, read back from TensorFlow, for the
    rank's ``hello`` record.
    """
    if precision not in POLICIES:
        raise RuntimeError(f"precision {precision.value} is not implemented for the Keras models")
    tf.config.experimental.enable_tensor_float_32_execution(precision == Precision.TF32)
    keras.mixed_precision.set_global_policy(POLICIES[precision])
    return {"dtype_policy": keras.mixed_precision.global_policy().name,
            "tf32": tf.config.experimental.tensor_float_32_execution_enabled()}


def compile_first_step(step: Callable[[], object], sync: Callable[[], None]) -> float:
    """compile = on: the first call traces the step and XLA-compiles it. Run and time it apart (seconds),
    before warm-up, as torch_ddp does, so compilation stays out of the measured window (``compile_s``)."""
    start = time.perf_counter()
    np.asarray(step())  # the loss's value: the step has finished, not only been queued
    sync()
    return time.perf_counter() - start


def device_memory(device_kind: str) -> Callable[[], dict[str, float]] | None:
    """What the rank's ``memory`` record says: the most GPU memory TensorFlow's allocator held for tensors
    (MiB; its BFC allocator reports no reserved figure); None on a CPU."""
    if device_kind != "cuda":
        return None
    return lambda: {"gpu_allocated_mb": tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20}
