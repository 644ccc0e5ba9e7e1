"""The workloads in Keras 3 (TensorFlow backend), shared by the TensorFlow frameworks.

Not a registered framework: ``tf_mwms`` and ``horovod_tf`` build their models, losses, optimizer
and training step from here, so both train exactly the same thing and differ only in how
gradients cross ranks. Nothing distribution-specific lives here. Images are channels-last
(NHWC), TensorFlow's native layout on CPU; the fixed NCHW batch is transposed once.
"""

import os

# Before TensorFlow is first imported (importing any module of this package comes first):
# keep TensorFlow's C++ start-up chatter (oneDNN notes, absl banners) out of the rank logs,
# and make sure Keras 3 runs on TensorFlow whatever the environment says elsewhere.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
