"""The emulated cluster the detector benchmarks plant their faults on (attribution.py, doctor.py): 16 emulated
GPUs (V100 profile, ResNet-50 at its tiny size, batch 64) as 4 network-namespace hosts of 4 (PCIe3 inside,
10GbE between, dilation 16, exact steps), torch_ddp over torchrun; one scenario, as a TOML document's dict."""

from __future__ import annotations

NODES, PROCS = 4, 4


def scenario_doc(hosts: dict[str, str], name: str, measured_steps: int, timeout_s: float,
                 fault: dict | None) -> dict:
    """The scenario on ``hosts`` (name -> address), with the ``[faults]`` table ``fault`` (none for None)."""
    doc = {"name": name,
           "settings": {"warmup_steps": 1, "measured_steps": measured_steps, "repeats": 1, "timeout_s": timeout_s,
                        "device": "emulated"},
           "emulation": {"accelerator": "v100", "exchange": "gradients", "intra_link": "PCIe3",
                         "inter_link": "10GbE", "dilation": 16, "step_variation": "none"},
           "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "batch_per_worker": 64,
                      "nodes": NODES, "procs_per_node": PROCS, "launcher": "torchrun"},
           "launcher_options": {"torchrun": {"hosts": list(hosts), "addresses": list(hosts.values()),
                                             "remote": "netns"}}}
    if fault:
        doc["faults"] = fault
    return doc
