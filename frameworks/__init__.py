"""Framework registry: one line per framework sub-package.

Adding a framework means adding its sub-package and a line here; nothing else.
The sub-packages' ``__init__`` must not import their deep-learning framework.
"""

from __future__ import annotations

from harness.base.registry import Registry
from harness.contract.framework_api import FrameworkInfo

REGISTRY: dict[str, str] = {
    "torch_ddp": "frameworks.torch_ddp",
    "chainer": "frameworks.chainer",
    "horovod_torch": "frameworks.horovod_torch",
    "tf_mwms": "frameworks.tf_mwms",
    "horovod_tf": "frameworks.horovod_tf",
    "jax": "frameworks.jax",
}
FRAMEWORKS: Registry[FrameworkInfo] = Registry("framework", REGISTRY, attribute="INFO")


def get(name: str, where: str = "") -> FrameworkInfo:
    """The declared facts of framework ``name`` (``UnknownName``, listing the valid names, if unknown)."""
    return FRAMEWORKS.get(name, where)


def names() -> list[str]:
    return FRAMEWORKS.names()
