"""The workloads in Keras 3 (TensorFlow backend), shared by the TensorFlow frameworks.

Not a registered framework: ``tf_mwms`` and ``horovod_tf`` build their models, losses, optimizer
and training step from here, so both train exactly the same thing and differ only in how
gradients cross ranks. Nothing distribution-specific lives here. Images are channels-last
(NHWC), TensorFlow's native layout on CPU; the fixed NCHW batch is transposed once.
"""
