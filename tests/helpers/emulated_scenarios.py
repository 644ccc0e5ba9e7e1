"""Scenario text for the emulated cluster's tests: a cluster of V100s on PCIe3 hosts over 10GbE, and a skip
naming what a framework's run here lacks."""

import shutil

import pytest

from tests.helpers.scenarios import toml_value

SCENARIO = """
name = "cluster"
[settings]
device = "emulated"
warmup_steps = 1
measured_steps = 2
repeats = 1
timeout_s = 600
[emulation]
accelerator = "v100"
exchange = "gradients"
intra_link = "PCIe3"
inter_link = "10GbE"
{emulation}
{faults}
[matrix]
framework = "{framework}"
workload = "resnet50"
size = "{size}"
batch_per_worker = 64
nodes = {nodes}
procs_per_node = {procs}
launcher = "{launcher}"
{extra}
[launcher_options.{launcher}]
hosts = {hosts}
remote = "netns"
{addresses}
"""


def scenario_text(framework="torch_ddp", launcher="torchrun", nodes=2, procs=2, size="full",
                  emulation="dilation = 8", names=("h0", "h1", "h2", "h3"),
                  addresses=("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"), extra="", faults=None):
    """The scenario's text; ``faults``: the keys of a ``[faults]`` table (harness.machines.faults), none without."""
    quoted = lambda xs: "[" + ", ".join(f'"{x}"' for x in xs) + "]"  # noqa: E731
    given = f"addresses = {quoted(addresses)}" if launcher != "horovodrun" else ""  # its ranks meet at its rendezvous
    return SCENARIO.format(framework=framework, launcher=launcher, nodes=nodes, procs=procs, size=size,
                           emulation=emulation, hosts=quoted(names), addresses=given, extra=extra,
                           faults=fault_table(faults) if faults else "")


def fault_table(faults) -> str:
    """A ``[faults]`` table of ``faults`` (key -> a TOML scalar)."""
    return "[faults]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in faults.items())


def skip_without(framework: str, launcher: str) -> None:
    """Skip the test, saying what is missing, where the framework's modules or its launcher are not here."""
    import frameworks

    missing = frameworks.get(framework).missing_modules() + ([launcher] if shutil.which(launcher) is None else [])
    if missing:
        pytest.skip(f"{framework} needs {', '.join(missing)}")
