"""The emulated cluster the detector benchmarks plant their faults on (attribution.py, doctor.py): 16 emulated
GPUs (V100 profile, ResNet-50 at its tiny size, batch 64) as 4 network-namespace hosts of 4 (PCIe3 inside,
10GbE between, dilation 16, exact steps), torch_ddp over torchrun; one scenario, as a TOML document's dict;
and how both score a detector: recall per fault kind, precision per class blamed, over fault-free runs too."""

from __future__ import annotations

from dataclasses import dataclass

NODES, PROCS = 4, 4


def scenario_doc(hosts: dict[str, str], name: str, measured_steps: int, timeout_s: float,
                 fault: dict | None, gradient_scale: int = 1) -> dict:
    """The scenario on ``hosts`` (name -> address), with the ``[faults]`` table ``fault`` (none for None);
    ``gradient_scale`` s: gradients at 1/s of their size over links s times slower (docs/scaling.md)."""
    doc = {"name": name,
           "settings": {"warmup_steps": 1, "measured_steps": measured_steps, "repeats": 1, "timeout_s": timeout_s,
                        "device": "emulated"},
           "emulation": {"accelerator": "v100", "exchange": "gradients", "intra_link": "PCIe3",
                         "inter_link": "10GbE", "dilation": 16, "step_variation": "none",
                         "gradient_scale": gradient_scale},
           "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "batch_per_worker": 64,
                      "nodes": NODES, "procs_per_node": PROCS, "launcher": "torchrun"},
           "launcher_options": {"torchrun": {"hosts": list(hosts), "addresses": list(hosts.values()),
                                             "remote": "netns"}}}
    if fault:
        doc["faults"] = fault
    return doc


@dataclass(frozen=True)
class Call:
    """One run's verdict against its planted fault, as both detector benchmarks score it."""

    planted: str | None  # the fault kind planted (None: a fault-free run)
    planted_class: str | None  # what that fault slows, in the detector's words (compute, link, input, host)
    called: str | None  # what the detector blamed first, in the same words (None: it called the run clean)
    place: bool  # the rank, host or card it named first is the planted one


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}% ({part}/{whole})" if whole else "-"


def score_table(calls: list[Call]) -> list[str]:
    """Markdown lines: per fault kind its recall (named first at the right place; and with the right class),
    fault-free runs called clean (1 - the false-positive rate), and per class the detector blamed its
    precision over clean and faulty runs together (a call is right where the place and the class are)."""
    lines = ["| planted | runs | recall: right place | recall: right place and kind |", "|---|---:|---:|---:|"]
    for kind in dict.fromkeys(c.planted for c in calls if c.planted):
        runs = [c for c in calls if c.planted == kind]
        placed = sum(c.called is not None and c.place for c in runs)
        kinds = sum(c.called == c.planted_class and c.place for c in runs)
        lines.append(f"| {kind} | {len(runs)} | {pct(placed, len(runs))} | {pct(kinds, len(runs))} |")
    clean = [c for c in calls if c.planted is None]
    if clean:
        quiet = sum(c.called is None for c in clean)
        lines.append(f"| none (fault-free) | {len(clean)} | called clean {pct(quiet, len(clean))} | "
                     f"false positives {pct(len(clean) - quiet, len(clean))} |")
    lines += ["", "| blamed | calls | precision: right place and kind | of them on fault-free runs |",
              "|---|---:|---:|---:|"]
    for blamed in sorted({c.called for c in calls if c.called}):
        made = [c for c in calls if c.called == blamed]
        right = sum(c.planted_class == blamed and c.place for c in made)
        lines.append(f"| {blamed} | {len(made)} | {pct(right, len(made))} | {sum(c.planted is None for c in made)} |")
    return lines
