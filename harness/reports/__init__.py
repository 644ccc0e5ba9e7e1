"""What people read of a sweep: the summary over repeats (``aggregate``), terminal tables (``terminal``), charts
(``charts``, ``storage_charts``, ``emulation``), the Markdown/HTML/notebook report (``notebook``), a sweep's
report as the commands print it (``sweep_report``), ``rosetta list`` (``catalog``), ``rosetta plan``
(``plan``), ``rosetta equivalence`` (``equivalence_report``) and the storage rules' verdicts
(``storage_rules``). The regression gate and reproduction have wings of their own (``harness.gate``,
``harness.reproduction``).

Imports ``harness.base``, ``contract``, ``machines``, ``experiment``, ``results`` and ``running``.
"""
