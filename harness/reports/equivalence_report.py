"""``rosetta equivalence``: every installed framework's probe of each workload it has (harness.running.probe)
against the reference framework's, as a rich table (parameters, forward FLOPs, optimizer, loss, the
verdict), and whether any drifted."""

from __future__ import annotations

import frameworks
from harness.contract.axes import Size, Workload
from harness.contract.equivalence import REFERENCE_FRAMEWORK
from harness.contract.workloads import DECLARATIONS
from harness.running.probe import probed_size, published_workloads, verify


def equivalence_report(names: list[str], size: Size, steps: int) -> tuple[object, bool]:
    """Probe the frameworks ``names`` (the reference first where it is among them) at ``size`` with ``steps``
    training steps; returns the table and whether a framework drifted or its probe failed."""
    from rich.table import Table

    trained = f"{steps} training steps" if steps else "no training steps: the loss is not checked"
    table = Table(title=f"equivalence with {REFERENCE_FRAMEWORK} ({size.value} size, {trained})")
    for name in ("framework", "workload", "parameters", "GFLOPs/sample", "optimizer", "loss", "verdict"):
        table.add_column(name)
    references: dict[Workload, dict] = {}
    drifted = False
    for name in names:
        drifted |= _probe_rows(table, name, size, steps, references)
    return table, drifted


def _probe_rows(table, name: str, size: Size, steps: int, references: dict) -> bool:
    """Add framework ``name``'s rows (one per workload it has, installed or not); True if it drifted."""
    info = frameworks.get(name)
    workloads = []
    for workload in published_workloads(list(info.workloads)):
        missing = info.missing_modules(workload)
        if missing:
            table.add_row(name, workload.value, "", "", "", "", f"not installed ({', '.join(missing)})")
        else:
            workloads.append(workload)
    if not workloads:
        return False
    try:
        verdicts = verify(name, workloads, size, steps, references)
    except RuntimeError as exc:
        table.add_row(name, ", ".join(w.value for w in workloads), "", "", "", "", f"[red]probe failed[/red]: {exc}")
        return True
    drifted = False
    for workload, (report, problems) in zip(workloads, verdicts):
        if name == REFERENCE_FRAMEWORK:
            references[workload] = report
        drifted |= bool(problems)
        losses = report["losses"]
        table.add_row(name, workload.value, f"{report['parameters']:,}", f"{report['flops_per_sample'] / 1e9:.3f}",
                      f"{report['optimizer']['name']} lr {report['optimizer']['lr']:g}",
                      f"{losses[0]:.3f} -> {losses[-1]:.3f}" if losses else "not checked (--steps 0)",
                      "[green]same[/green]" if not problems else "[red]DRIFT[/red]: " + "; ".join(problems))
    return drifted


def capped_notes(names: list[str], size: Size) -> list[str]:
    """A line for each workload of the frameworks ``names`` whose probe builds a smaller size than ``size``
    (Llama 3.1 8B is not built on a CPU): what was built and checked instead."""
    notes = []
    for workload in (DECLARATIONS[name].name for name in DECLARATIONS):
        built = probed_size(workload, size)
        if built != size and any(workload in frameworks.get(name).workloads for name in names):
            notes.append(f"{workload.value}: its {size.value} model is not built here; the probes built {built.value} "
                         f"and checked its parameters against the count from its options "
                         f"({DECLARATIONS[workload].published_parameters:,} at {Size.FULL.value}, as published)")
    return notes
