"""The equivalence probe of horovod_tf: the shared Keras models, optimizer and training step."""

from frameworks.shared.keras.probe import probe

__all__ = ["probe"]
