"""The contract between the harness and the framework workers: a spec file in, per-rank event records out.

``axes`` (the str-Enums every dimension takes), ``strategy_options``, ``spec`` (RunSpec, CommSpec and their
file), ``events`` (the per-rank records), ``measure`` (the measured loop every worker runs), ``lifetime``,
``telemetry`` and ``machine_load``, ``workloads`` (sizes and presets), ``equivalence`` (the recipe every
framework trains the same way), ``framework_api`` (what a framework declares) and ``worker`` (the process
entry point). Imports only ``harness.base``; frameworks' workers import this wing, ``machines`` and the
storage readers, nothing else of the harness.
"""
