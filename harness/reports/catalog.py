"""``rosetta list``: what is known here, from the registries and declarations alone: the frameworks (what
each supports, whether it is installed), the workloads and their sizes, the strategies with their default
options, the storage backends, devices, launchers, networks, the emulated cluster's accelerator profiles and
link presets (harness/machines/accelerators.toml, interconnects.toml) and the numeric axes' bounds; as rich
renderables for the command to print."""

from __future__ import annotations

import dataclasses

import frameworks
from harness import launchers
from harness.base import network
from harness.base.escaping import terminal as escape
from harness.contract.axes import Device, MemoryFormat, Storage, Strategy
from harness.contract.framework_api import FrameworkInfo
from harness.contract.workloads import WORKLOADS
from harness.experiment.scenario import Matrix
from harness.experiment.strategies import ONE_HOST, OPTIONS
from harness.machines import accelerators, interconnects


def catalog_items() -> list:
    """The frameworks' table, the workloads' table, one line per other registry, then the emulated cluster's
    accelerator profiles and link presets (each with its source)."""
    return [frameworks_table(), workloads_table(),
            f"Strategies (default options): {'; '.join(strategy_with_options(s) for s in Strategy)}",
            f"One host only (a model in shared memory): {', '.join(s.value for s in ONE_HOST)}",
            f"Storage backends: {', '.join(s.value for s in Storage)}",
            f"Devices: {', '.join(d.value for d in Device)}",
            f"Launchers: {', '.join(launchers.names())} ({launchers.AUTO}: the framework's first)",
            f"Networks (link cap between hosts): {network.UNLIMITED} or a rate such as 1gbit, 100mbit",
            f"Numeric axes (integers): {', '.join(numeric_bounds())}; sizes: see Workloads",
            accelerators_table(), links_table()]


def frameworks_table():
    from rich.table import Table

    table = Table(title="Frameworks")
    for col in ("name", "title", "launchers", "workloads", "strategies", "storage", "devices", "precision",
                "memory format", "compile", "installed"):
        table.add_column(col)
    for name in frameworks.names():
        info = frameworks.get(name)
        table.add_row(name, info.title, ", ".join(info.launchers), ", ".join(w.value for w in info.workloads),
                      ", ".join(strategy_cell(info, s) for s in info.strategies),
                      ", ".join(s.value for s in info.storage),
                      ", ".join(d.value for d in info.devices), ", ".join(p.value for p in info.precisions),
                      memory_formats(info), ", ".join(c.value for c in info.compiles), installed(info))
    return table


def installed(info: FrameworkInfo) -> str:
    """Whether its packages are here: yes, no (naming the missing ones), or yes but not for some workloads."""
    missing = info.missing_modules()
    if missing:
        return f"[red]no[/red] (missing {', '.join(missing)})"
    extra = sorted({m for w in info.workloads for m in info.missing_modules(w)})
    return "[green]yes[/green]" + (f" (for some workloads, missing {', '.join(extra)})" if extra else "")


def workloads_table():
    from rich.table import Table

    table = Table(title="Workloads (sizes are option sets)")
    for col in ("name", "model", "unit", "sizes"):
        table.add_column(col)
    for info in (WORKLOADS[name] for name in WORKLOADS):
        sizes = "; ".join(f"{s.value}: " + ", ".join(f"{k}={v}" for k, v in opts.items())
                          for s, opts in info.presets.items())
        table.add_row(info.name.value, info.title, info.sample_unit, sizes)
    return table


def strategy_cell(info: FrameworkInfo, strategy: Strategy) -> str:
    """A strategy as the frameworks' table shows it: its name, and the devices it runs on where it is bound to some."""
    devices = info.strategy_devices.get(strategy)
    return strategy.value + (f" ({'/'.join(d.value for d in devices)} only)" if devices else "")


def strategy_with_options(strategy: Strategy) -> str:
    """A strategy with its default options and the workloads it is limited to in some frameworks."""
    defaults = dataclasses.asdict(OPTIONS[strategy]())
    shown = [f"{k}={getattr(v, 'value', v)}" for k, v in defaults.items()]  # str-Enums by their value
    shown += [f"{name}: {'/'.join(w.value for w in frameworks.get(name).strategy_workloads[strategy])} only"
              for name in frameworks.names() if strategy in frameworks.get(name).strategy_workloads]
    return strategy.value + (f" ({', '.join(shown)})" if shown else "")


def memory_formats(info: FrameworkInfo) -> str:
    """The memory formats a framework runs in: contiguous, and others with the workloads that have them."""
    others: dict[str, list[str]] = {}
    for workload in info.workloads:
        for fmt in info.memory_formats.get(workload, ()):
            if fmt != MemoryFormat.CONTIGUOUS:
                others.setdefault(fmt.value, []).append(workload.value)
    return "; ".join([MemoryFormat.CONTIGUOUS.value] + [f"{f} ({', '.join(w)})" for f, w in others.items()])


def numeric_bounds() -> list[str]:
    """The integer axes of the matrix with their bounds."""
    return [f"{f.name} {f.metadata['min']}..{f.metadata['max']:,}" for f in dataclasses.fields(Matrix)
            if "max" in f.metadata]


def accelerators_table():
    """The accelerator profiles (``emulation.accelerator``): one row per profiled step, its step time and source."""
    from rich.table import Table

    table = Table(title="Emulated accelerators (emulation.accelerator; harness/machines/accelerators.toml)")
    for col in ("name", "workload", "batch", "precision", "step (s)", "source"):
        table.add_column(col)
    for p in accelerators.load_profiles()[0]:
        table.add_row(escape(p.accelerator), f"{p.workload.value}/{p.size.value}", str(p.batch), p.precision.value,
                      f"{p.compute_s:g}", escape(p.source))
    return table


def links_table():
    """The link presets (``emulation.intra_link``, ``inter_link``, ``rosetta project --interconnect``) with their
    effective bandwidth (GB/s each direction), latency per ring step (us) and source."""
    from rich.table import Table

    table = Table(title="Interconnect presets (emulation.intra_link, inter_link; harness/machines/interconnects.toml)")
    for col in ("name", "title", "GB/s", "latency (us)", "source"):
        table.add_column(col)
    for name, link in interconnects.load_presets().links.items():
        table.add_row(escape(name), escape(link.title), f"{link.bandwidth_GBps:g}", f"{link.latency_us:g}",
                      escape(link.source))
    return table
