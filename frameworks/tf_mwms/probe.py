"""The equivalence probe of tf_mwms: the shared Keras models, optimizer and training step."""

from frameworks.keras_models.probe import probe

__all__ = ["probe"]
