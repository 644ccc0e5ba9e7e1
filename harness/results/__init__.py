"""Results as tidy rows: the versioned table (``table``), what a table read back must be before it is used
(``integrity``), the table made again from every run's row.json (``rebuild``), each row's provenance (``provenance``), the
one redaction everything leaving the harness goes through (``redact``), the statistics computed from raw
samples (``metrics``) and the regression verdicts between two tables (``compare``; how they are printed and
written for CI systems lives in ``harness.reports``).

Imports ``harness.base`` and ``harness.contract`` only.
"""
