"""Emulated accelerators (MLPerf Storage's method): a training step that is a calibrated sleep of the
compute time a real accelerator takes, from profiles kept as data with their sources
(``accelerators.toml`` beside this module).

A scenario with ``device = "emulated"`` has an ``[emulation]`` table (:class:`EmulationOptions`): the
accelerator's profile (or a compute time given outright), how a step spends it (``sleep``: the
emulation; ``spin``: a busy loop of the same length, a real step of known length used to check the
emulation's fidelity on a CPU), an optional scale of the compute time and the AU threshold. The matrix
resolves it per run into the RunSpec's ``emulation`` mapping (:func:`resolve`): the compute seconds per
step, the threshold, and where the figure came from; on an emulated cluster also the profile's measured
step spread (``step_variation``, ``step_factors``: a real GPU's steps over their mean), which each rank's
steps draw from. Accelerator utilization AU = compute time / wall time of the measured window, the slowest
rank's.
"""

from __future__ import annotations

import os
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from harness.base.errors import UserError
from harness.contract.axes import Exchange, Precision, Size, StepVariation, Workload
from harness.contract.workloads import WORKLOADS
from harness.machines import emulated_cluster, model_flops

PROFILES_FILE = Path(__file__).with_name("accelerators.toml")


@dataclass(frozen=True)
class Profile:
    """One accelerator's measured compute time per step (seconds) for one workload configuration."""

    accelerator: str
    workload: Workload
    size: Size
    batch: int
    precision: Precision
    compute_s: float
    source: str
    variation: str = ""  # a [[variation]] of accelerators.toml: a real GPU's measured steps; "": steps exactly


@dataclass(frozen=True)
class Variation:
    """A real GPU's measured step times (seconds, in order), whose spread an emulated cluster's steps draw."""

    name: str
    step_s: tuple[float, ...]
    source: str

    def factors(self) -> list[float]:
        """Each measured step / their mean: what an emulated step's profiled time is multiplied by."""
        mean = sum(self.step_s) / len(self.step_s)
        return [s / mean for s in self.step_s]


@dataclass(frozen=True)
class EmulationOptions:
    """``[emulation]``: which accelerator a rank stands for and how its steps are spent."""

    accelerator: str = ""  # a profile's name (accelerators.toml), e.g. "h100"
    compute_s: float = field(default=0.0, metadata={"min": 0.0})  # or the step's compute time outright (s)
    compute_scale: float = field(default=1.0, metadata={"min": 0.0})  # x the profile's time (a slower accelerator)
    step: str = field(default="sleep", metadata={"choices": ("sleep", "spin")})  # spin: a busy loop (fidelity check)
    au_threshold: float = field(default=0.0, metadata={"min": 0.0, "max": 1.0})  # 0: the workload's (toml)
    # the emulated cluster (harness.machines.emulated_cluster): real gradients over dilated, shaped links
    exchange: Exchange = Exchange.BARRIER
    intra_link: str = ""  # between GPUs of a host: a [link] of interconnects.toml, e.g. "PCIe3", "NVLink"
    inter_link: str = ""  # each host's network card, e.g. "10GbE", "IB-EDR"
    dilation: float = field(default=0.0, metadata={"min": 0.0, "max": emulated_cluster.MAX_DILATION})  # 0: auto
    # of the step's compute, the share after the backward (the optimizer's update, the next batch), which the
    # gradients' exchange does not overlap: it starts once the last one has arrived. 0: all forward and backward
    # (a GPU's fused update is well under 1% of its step; a CPU's plain SGD a quarter of it: the fidelity check)
    update_share: float = field(default=0.0, metadata={"min": 0.0, "max": 0.9})
    # the emulated host's input pipeline (frameworks/shared/emulated_clock.InputClock, a DataLoader's): worker processes
    # per GPU, each preparing whole batches at input_rate samples/s (decoding, augmenting; undilated). 0: batches
    # cost nothing, as on synthetic data. Measure your host's rate with a real-data run (loader_throughput
    # over its loader workers) at the load you will run it under: a busier host decodes slower per worker
    input_workers: int = field(default=0, metadata={"min": 0, "max": 256})
    input_rate: float = field(default=0.0, metadata={"min": 0.0})
    # measured: each emulated GPU's step varies as the profile's [[variation]] (a real GPU's measured steps) did,
    # drawn per rank and step, so that a synchronous step waits for its slowest rank; none: every step exactly
    # the profile's time (a profile without a variation steps exactly either way)
    step_variation: StepVariation = StepVariation.MEASURED
    # beyond one process a GPU (docs/scaling.md): each process stands for gpus_per_rank GPUs of its host (its
    # host's GPUs: procs_per_node x gpus_per_rank), their in-host reduction timed from intra_link rather than
    # run; and every gradient is exchanged at 1/gradient_scale of its size over links gradient_scale times
    # slower (the same bandwidth term, the same buckets, the latencies unchanged). 1: the full-size emulation
    gpus_per_rank: int = field(default=1, metadata={"min": 1, "max": 64})
    gradient_scale: int = field(default=1, metadata={"min": 1, "max": 1024})


def load_profiles(path: Path = PROFILES_FILE) -> tuple[list[Profile], dict[str, float]]:
    doc = tomllib.loads(path.read_text())
    profiles = [Profile(p["accelerator"], Workload(p["workload"]), Size(p["size"]), int(p["batch"]),
                        Precision(p["precision"]), float(p["compute_s"]), p["source"], p.get("variation", ""))
                for p in doc["profile"]]
    known = _variations_in(doc, path)
    for p in profiles:
        if p.variation and p.variation not in known:
            raise UserError(f"{path.name}: profile {p.accelerator}/{p.workload.value}/{p.precision.value} names "
                            f"variation {p.variation!r}, which no [[variation]] there is")
    return profiles, {k: float(v) for k, v in doc["thresholds"].items()}


def load_variations(path: Path = PROFILES_FILE) -> dict[str, Variation]:
    """The ``[[variation]]`` tables of ``path`` by name; each needs two positive step times or more."""
    return _variations_in(tomllib.loads(path.read_text()), path)


def _variations_in(doc: Mapping[str, Any], path: Path) -> dict[str, Variation]:
    out = {}
    for v in doc.get("variation", []):
        steps = tuple(float(s) for s in v["step_s"])
        if len(steps) < 2 or min(steps) <= 0:
            raise UserError(f"{path.name}: variation {v['name']!r}: step_s needs two positive step times or more")
        out[v["name"]] = Variation(v["name"], steps, v["source"])
    return out


def nearest(accelerator: str, workload: Workload, batch: int, precision: Precision,
            profiles: list[Profile]) -> Profile:
    """The profile of the same accelerator, workload and precision at the batch nearest ``batch``."""
    same = [p for p in profiles if p.accelerator == accelerator and p.workload == workload and p.precision == precision]
    if not same:
        known = sorted({f"{p.accelerator}/{p.workload.value}/{p.precision.value}" for p in profiles})
        raise UserError(f"emulation: no profile for accelerator {accelerator!r}, {workload.value}, "
                        f"{precision.value} (known: {', '.join(known)}; harness/machines/accelerators.toml)")
    return min(same, key=lambda p: abs(p.batch - batch))


def lookup(accelerator: str, workload: Workload, batch: int, precision: Precision,
           profiles: list[Profile]) -> tuple[float, str]:
    """Compute seconds per step of ``batch`` samples, and where the figure came from.

    The profile of the same accelerator, workload and precision at this batch if there is one; else the
    one at the nearest batch, scaled linearly per sample (said in the source: an approximation, a
    GPU's step time is not linear in batch at small batches). The profile's model size is the full
    model's, whatever size the loader's crops are."""
    best = nearest(accelerator, workload, batch, precision, profiles)
    if best.batch == batch:
        return best.compute_s, best.source
    return (best.compute_s * batch / best.batch,
            f"scaled linearly from batch {best.batch} ({best.compute_s} s) to {batch}: {best.source}")


def resolve(options: EmulationOptions, workload: Workload, batch: int, precision: Precision,
            size: Size = Size.FULL, nodes: int = 1, procs_per_node: int = 1,
            exchange_cpu_cost: float = 1.0) -> dict[str, Any]:
    """A run's ``emulation`` mapping: accelerator, compute_s (per step, scaled), step, au_threshold, source;
    with ``exchange = "gradients"`` also the links and the dilation k (``dilation = 0``: picked for this
    configuration and this machine's cores by :func:`emulated_cluster.auto_dilation`, the framework's
    exchange costing ``exchange_cpu_cost`` x gloo's CPU a byte)."""
    profiles, thresholds = load_profiles()
    if options.compute_s > 0:
        compute, source = options.compute_s, "given in the scenario's [emulation] compute_s"
    elif options.accelerator:
        compute, source = lookup(options.accelerator, workload, batch, precision, profiles)
    else:
        raise UserError("emulation: set accelerator (a profile in harness/machines/accelerators.toml) or compute_s")
    if options.compute_scale != 1.0:
        source = f"x{options.compute_scale:g} ({source})"
    resolved = {"accelerator": options.accelerator or "custom", "compute_s": compute * options.compute_scale,
                "step": options.step, "source": source,
                "au_threshold": options.au_threshold or thresholds.get(workload.value, 0.9)}
    if options.exchange == Exchange.GRADIENTS:
        resolved.update(_cluster(options, workload, size, nodes, procs_per_node, resolved["compute_s"],
                                 exchange_cpu_cost))
        resolved.update(_input(options, batch))
        resolved.update(gpus_per_rank=options.gpus_per_rank, gradient_scale=options.gradient_scale)
        if options.step_variation == StepVariation.MEASURED and options.accelerator and not options.compute_s:
            resolved.update(_variation(nearest(options.accelerator, workload, batch, precision, profiles)))
    elif any((options.intra_link, options.inter_link, options.dilation, options.update_share, options.input_workers,
             options.input_rate, options.gpus_per_rank > 1, options.gradient_scale > 1)):
        raise UserError('emulation: links, dilation, gpus_per_rank, gradient_scale, update_share and input_workers '
                        'need exchange = "gradients" (a barrier carries no bytes; its ranks read through their '
                        'real loaders)')
    return resolved


def _variation(profile: Profile) -> dict[str, Any]:
    """The emulated cluster's step variation: the profile's [[variation]] as factors (mean 1) and its name;
    empty for a profile without one. Under MLPerf Storage's barrier every step is the profile's, as its
    rules have it."""
    if not profile.variation:
        return {}
    variation = load_variations()[profile.variation]
    return {"step_variation": variation.name, "step_factors": variation.factors()}


def _input(options: EmulationOptions, batch: int) -> dict[str, Any]:
    """The emulated host loader's part of the mapping: workers per GPU and one batch's time in one worker
    (``input_batch_s``, s undilated); empty without one."""
    if bool(options.input_workers) != bool(options.input_rate):
        raise UserError("emulation: input_workers and input_rate go together (workers per GPU, samples/s a worker)")
    if not options.input_workers:
        return {}
    return {"input_workers": options.input_workers, "input_rate": options.input_rate,
            "input_batch_s": batch / options.input_rate}


def _cluster(options: EmulationOptions, workload: Workload, size: Size, nodes: int, procs_per_node: int,
             compute_s: float, exchange_cpu_cost: float) -> dict[str, Any]:
    """The emulated cluster's part of the mapping: exchange, link names and the dilation k."""
    intra = emulated_cluster.link(options.intra_link) if options.intra_link else None
    inter = emulated_cluster.link(options.inter_link) if options.inter_link else None
    grad = 4 * model_flops.weight_parameters(workload, WORKLOADS[workload].options(size))
    gpus_per_host = procs_per_node * options.gpus_per_rank  # the emulated cluster's, whatever its processes
    exchange_s = emulated_cluster.undilated_exchange_s(intra, inter, nodes, gpus_per_host, grad)
    # this machine's CPU work: its processes, each making and exchanging 1/gradient_scale of the gradient
    k = options.dilation or emulated_cluster.auto_dilation(nodes * procs_per_node, grad / options.gradient_scale,
                                                           exchange_s, compute_s, os.cpu_count() or 1,
                                                           exchange_cpu_cost)
    # link_exchange_s: the links' own time for a ring allreduce of the gradients (undilated), against which
    # a run tells an exchange this machine's CPU held back (harness.running.emulation_fields)
    return {"exchange": Exchange.GRADIENTS.value, "intra_link": options.intra_link,
            "inter_link": options.inter_link, "dilation": float(k), "dilation_auto": not options.dilation,
            "update_share": options.update_share, "link_exchange_s": exchange_s}


class EmulatedStep:
    """One emulated accelerator's compute: sleeps (or spins) ``compute_s`` per call, calibrated.

    ``time.sleep`` overshoots by a scheduler-dependent amount (tens of microseconds idle, milliseconds on
    a loaded machine); each call aims at a deadline and sleeps the remainder less the overshoot seen so
    far (a running mean), so the steps average the profiled time. ``spent_s`` is what the calls took."""

    def __init__(self, emulation: Mapping[str, Any]):
        self.compute_s = float(emulation["compute_s"])
        self.spin = emulation.get("step") == "spin"
        self.overshoot = 0.0  # running mean of how late sleep() returned (s)
        self.calls = 0
        self.spent_s = 0.0

    def __call__(self) -> None:
        clock = time.perf_counter
        start = clock()
        deadline = start + self.compute_s
        if self.spin:
            while clock() < deadline:
                pass
        else:
            wanted = self.compute_s - self.overshoot
            if wanted > 0:
                time.sleep(wanted)
            self.calls += 1
            self.overshoot += ((clock() - start) - max(wanted, 0.0) - self.overshoot) / min(self.calls, 20)
            while clock() < deadline:  # returned early (overshoot over-estimated): wait the rest without sleeping long
                time.sleep(0)
        self.spent_s += clock() - start
