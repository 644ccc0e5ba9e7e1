"""Closed sets of values used as scenario axes and result columns."""

from enum import Enum


class Workload(str, Enum):
    RESNET50 = "resnet50"
    BERT = "bert"
    DIGITS = "digits"  # scikit-learn's handwritten digits: the time-to-accuracy workload


class Size(str, Enum):
    """Workload variant; the options behind each are data in :mod:`harness.workloads`."""

    TINY = "tiny"
    SMALL = "small"
    FULL = "full"
    LARGE = "large"


class Strategy(str, Enum):
    """How workers combine their work; the options of each are data in :mod:`harness.strategies`."""

    ALLREDUCE = "allreduce"  # synchronous data parallelism: average fp32 gradients every step
    ONEBIT = "onebit"  # 1-bit SGD with error feedback (Seide et al. 2014)
    BMUF = "bmuf"  # blockwise model-update filtering / block momentum (Chen and Huo 2016)
    LOCAL_SGD = "local_sgd"  # average parameters every tau local steps (SparkNet)
    FP16 = "fp16"  # gradients sent as fp16 (PyTorch's built-in hook)
    BF16 = "bf16"  # gradients sent as bf16 (PyTorch's built-in hook; CUDA and NCCL only)
    POWERSGD = "powersgd"  # low-rank gradient compression (Vogels et al. 2019; PyTorch's hook)


class Storage(str, Enum):
    SYNTHETIC = "synthetic"


class Device(str, Enum):
    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"


class Status(str, Enum):
    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"
    DIVERGED = "diverged"  # ran, but its loss was not finite or did not decrease: no throughput reported


def values(enum: type[Enum]) -> list[str]:
    """The allowed string values of an enum, for error messages."""
    return [member.value for member in enum]
