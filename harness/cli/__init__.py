"""The ``rosetta`` command, one module per group of verbs: ``sweep`` (list, plan, run, equivalence),
``results`` (report, compare, history, reproduce), ``dashboard`` (dashboard), ``perf`` (comm, project),
``data`` (data make), and
``main``, which builds the parser from theirs and turns errors into one line. The top floor: it may
import every other wing, and nothing imports it.
"""
