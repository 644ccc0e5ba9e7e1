"""What people read: the summary over repeats (``aggregate``), terminal tables (``terminal``), charts
(``charts``), the Markdown/HTML/notebook report (``notebook``), published figures (``reference``), their
reproduction (``reproduce``), the history of a configuration across sweeps (``history``), its static site (``dashboard``) and the
regression verdicts as a terminal table (``verdict_table``) and for CI systems (``ci_reports``: JUnit XML,
Markdown, JSON).

Imports ``harness.base``, ``contract``, ``experiment`` and ``results``; nothing below imports it.
"""
