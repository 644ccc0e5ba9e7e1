"""Results sent where teams already look: every row as a run of an experiment tracker (``mlflow_rows``:
what of a row becomes a parameter, a metric, a tag or an artifact; ``mlflow_export``: the runs logged
through MLflow's client, once each).

Imports ``harness.base``, ``contract``, ``results`` and ``reports`` (the charts it attaches); MLflow only
inside functions, where an export is asked for (the ``engines`` extra).
"""
