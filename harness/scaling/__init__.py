"""The scaling model: predicted efficiency from an interconnect (``model``, presets in
``harness/machines/interconnects.toml``), projections to clusters not at hand (``projection``,
``projection_report``) and the model checked against measured runs (``check``); its prediction of a published
curve is ``harness.reproduction.prediction``.

Imports ``harness.base``, ``contract``, ``machines``, ``results``, ``reports`` and ``comm`` (measured bandwidth).
"""
