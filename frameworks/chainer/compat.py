"""Importing Chainer 7.8.1 (its last release, 2020) with today's Python packaging.

``import chainer`` runs ``numpy.distutils.system_info`` (its environment check), which
needs the standard library's ``distutils``. setuptools puts an import hook in every
interpreter at start-up (``distutils-precedence.pth``) that serves its own copy instead,
which lacks ``distutils.msvccompiler``, so the import fails -- unless
SETUPTOOLS_USE_DISTUTILS=stdlib was set before the interpreter started. Worker and probe
processes are started by launchers and test suites that know nothing of Chainer, so this
module takes the hook out in-process instead, before Chainer is imported, and sets the
variable for any process started from here. (Python 3.11 still has the standard
library's ``distutils``; 3.12 does not, and Chainer 7.8.1 does not import there.)
"""

from __future__ import annotations

import os
import sys
import warnings
from types import ModuleType


def _use_stdlib_distutils() -> None:
    os.environ["SETUPTOOLS_USE_DISTUTILS"] = "stdlib"
    hack = sys.modules.get("_distutils_hack")
    if hack is not None and hack.DISTUTILS_FINDER in sys.meta_path:
        sys.meta_path.remove(hack.DISTUTILS_FINDER)
    # a distutils that setuptools already served would stay in use: forget it
    for name in [m for m in sys.modules if m == "distutils" or m.startswith("distutils.")]:
        if "setuptools" in (getattr(sys.modules[name], "__file__", None) or ""):
            del sys.modules[name]


def import_chainer() -> ModuleType:
    """``chainer``, imported so that it works here (see the module's docstring)."""
    if "chainer" not in sys.modules:
        _use_stdlib_distutils()
        with warnings.catch_warnings():
            # notices about what Chainer imports (pkg_resources, numpy.distutils), nothing wrong here
            warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            import chainer  # noqa: F401
    return sys.modules["chainer"]
