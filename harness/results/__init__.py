"""Results as tidy rows: the row as typed sections, from which the table's columns and schema version derive
(``row``), the versioned table (``table``), what a table read back must be before it is used
(``integrity``), the table made again from every run's row.json (``rebuild``), each row's provenance
(``provenance``), the one redaction everything leaving the harness goes through (``redact``), the statistics
computed from raw samples (``metrics``), achieved FLOP/s (``utilization``), MLPerf Storage's run rules
(``mlperf``), which sweeps a verb reads (``sweeps``) and a sweep's figure from its launches, with their two
levels of noise and slowed launches modelled (``launches``); the regression verdicts between tables live in
``harness.gate``.

Imports ``harness.base``, ``harness.contract`` and ``harness.machines`` only.
"""
