"""The workloads in Keras 3 (TensorFlow backend), shared by the TensorFlow frameworks.

Not a registered framework: ``tf_mwms`` and ``horovod_tf`` build their models, losses, optimizer
and training step from here, so both train exactly the same thing and differ only in how
gradients cross ranks (both emulate an accelerator through emulated_device.py too). Nothing
distribution-specific lives here. Images are channels-last (NHWC), TensorFlow's native layout on CPU;
the fixed NCHW batch is transposed once.

Importing this package imports Keras (and TensorFlow) the way a worker should, so a worker imports
it before either of them. Only worker processes import it: unlike a registered framework's package,
whose ``__init__`` the harness reads and which must not import its framework.
"""

import os
import sys

# Before TensorFlow is first imported: keep TensorFlow's own C++ notes (its CPU-feature banner) out of
# the rank logs, and make sure Keras 3 runs on TensorFlow whatever the environment says elsewhere. The
# notes absl prints before its logging starts (oneDNN's among them) reach the logs anyway: with
# TensorFlow 2.21 not even level 3 silences them (tried).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

# Keras imports these as it is itself imported, wherever they are installed (the harness needs them),
# for utilities no worker calls: image galleries, DataFrame inputs, the scikit-learn wrappers. That
# is a third of every TensorFlow rank's import on 2 cores (tensorflow and keras: 3.1-3.3 s against
# 2.2-2.6 s without them, measured). They are hidden from Keras's import only: a later import finds
# them (the digits workload loads its data with scikit-learn).
KERAS_OPTIONAL_IMPORTS = ("matplotlib", "pandas", "sklearn")


def _import_keras() -> None:
    hidden = [name for name in KERAS_OPTIONAL_IMPORTS if name not in sys.modules]
    sys.modules.update(dict.fromkeys(hidden))  # None: "import of NAME halted", an ImportError
    try:
        import keras  # noqa: F401
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


_import_keras()
