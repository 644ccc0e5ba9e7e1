"""The regression gate: whether throughput moved, and whether CI should fail.

``compare`` (two result sets configuration by configuration), ``history`` (each configuration's series across
sweeps on each machine, and the gate's verdict on the newest sweep), ``changepoints`` (levels, steps,
outliers, trends, power) over ``sequential`` (the gate's pass, each sweep judged once, on the figures of
``harness.results.launches``; ``record``, what it writes down), ``marks`` (accepted baselines), ``canary``
(a planted step the gate must see), ``history_chart``, ``dashboard`` (the static site; ``dashboard_pages``,
``dashboard_svg``, ``dashboard_assets``), ``verdict_table`` (compare's and history's terminal tables) and
``ci_reports`` (JUnit XML, Markdown, JSON), ``where`` (the straggler and phase a comparison moved, from per-rank rows).

Imports ``harness.base``, ``contract``, ``results`` and ``reports`` (the charts' common parts).
"""
