"""The cluster check, ``rosetta doctor``: per host a compute probe (each GPU's step of the workload alone)
and its network card both ways, between hosts point-to-point and ring collectives through ``rosetta comm``'s
worker and a bisection; each figure judged against a baseline of earlier checks of the machine type, kept in
the store, or (peer-relative) this check's median and spread, each suspect re-probed before it is named.
``judge`` (pure: the judgement, the repeats and the bisection), ``probes`` (the launches), ``check`` (one check, its exit status), ``store`` (``doctor.parquet``), ``report`` (its outputs).

Imports ``harness.base``, ``contract``, ``machines``, ``launchers``, ``experiment``, ``results``, ``running``
and ``comm``.
"""
