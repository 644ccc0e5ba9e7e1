"""The emulated cluster's fidelity where a truth exists here: a real 2-process CPU run (real compute, real gloo
allreduce over a capped link between two network-namespace hosts) against the emulated run of the same
configuration, at time dilations k = 1, 4 and 16.

1. profile: the real configuration with local SGD and a period longer than the run (DDP's no-op hook: no
   exchange in the window), so its step is the compute alone, on the same hosts and threads;
2. real: PyTorch DDP's allreduce of ResNet-50's 102 MB of gradients over the capped link;
3. emulated: device emulated, exchange "gradients", compute_s = the profile's step, the same link
   (``inter_link`` = the cap), k = 1, 4, 16. Its ``update_share`` is the part of the profile's step outside
   DDP's forward and backward compute (the optimizer's update, zeroing, the next batch: a quarter of the
   step on this CPU), which a real step spends after the exchange has ended, not beside it;
4. emulated with the real run's compute: compute_s = the profile's step plus what the real run's forward
   and backward compute took beyond the profile's, as DDP's reducer timed both (the ``ddp_timing``
   records: the slowest rank's median), the same update seconds after the exchange. On this CPU the real
   backward shares its core with gloo's reduction and the kernel's TCP copies; a GPU's kernels are not
   slowed by its host's TCP, and an emulated rank's sleep is not either. This row asks the emulation's own
   question: given the compute as it ran, does the emulated exchange (buckets, overlap, link) give the real
   step? k = 1, 4, 16; and once (k = 4) with no update share, the whole step spread over the passes, to show
   what the share changes.
Rounds interleave the kinds, so drift of the machine hits all alike. Prints the medians, each emulated
one's ratio to the real one (goal: within 5%, flat in k where the emulation is valid), the rows' CPU
figures, and appends the table to benchmarks/RESULTS.md. Needs root (network namespaces).
Usage: python benchmarks/emulated_cluster_fidelity.py [--rounds N] [--cap 2gbit] [--steps S]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from harness.contract.events import read_rank
from harness.experiment import scenario
from harness.launchers.hosts import namespace_hosts
from harness.results import provenance
from harness.running.runner import run_sweep

HERE = Path(__file__).resolve().parent
DILATIONS = (1, 4, 16)


def _doc(hosts: dict[str, str], steps: int, **kw) -> dict:
    settings = {"warmup_steps": 2, "measured_steps": steps, "repeats": 1, "timeout_s": 1800,
                "device": kw.pop("device", "cpu")}
    doc = {"name": kw.pop("name"), "settings": settings,
           "matrix": {"framework": "torch_ddp", "workload": "resnet50", "size": "tiny", "batch_per_worker": 8,
                      "nodes": 2, "procs_per_node": 1, "launcher": "torchrun", **kw.pop("matrix", {})},
           "launcher_options": {"torchrun": {"hosts": list(hosts), "addresses": list(hosts.values()),
                                             "remote": "netns"}}}
    doc.update(kw)
    return doc


def _run(doc: dict, results: Path) -> dict:
    [row] = run_sweep(scenario.parse(doc, "fidelity", default_name=doc["name"]), results)
    if row["status"] != "ok":
        raise SystemExit(f"{doc['name']}: {row['status']}: {row.get('reason')}")
    return row


def compute_s(row: dict) -> float:
    """The slowest rank's median forward plus backward compute per step (s), as DDP timed it."""
    per_rank = []
    for rank in range(row["world_size"]):
        timing = read_rank(Path(row["run_dir"]), rank).ddp_timing
        if not timing or not timing["steps"]:
            raise SystemExit(f"{row['run_dir']}: rank {rank} has no ddp_timing record")
        per_rank.append(statistics.median(s["forward_compute_s"] + s["backward_compute_s"] for s in timing["steps"]))
    return max(per_rank)


def _emulated(hosts: dict[str, str], args: argparse.Namespace, results: Path, name: str, step_s: float,
              k: int, update_s: float) -> dict:
    emulation = {"compute_s": round(step_s, 6), "exchange": "gradients", "inter_link": args.cap, "dilation": k,
                 "update_share": round(update_s / step_s, 4)}
    return _run(_doc(hosts, args.steps, name=name, device="emulated", emulation=emulation), results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cap", default="2gbit", help="the link between the two hosts (tc rate)")
    parser.add_argument("--steps", type=int, default=5, help="measured steps per run")
    args = parser.parse_args()
    rows: dict[str, list[dict]] = {}
    computes: list[str] = []  # per round: the profile's step, and the compute alone and in the real run
    with namespace_hosts(2, prefix="rosetta-fid") as hosts, tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp)
        for _ in range(args.rounds):
            profile = _run(_doc(hosts, args.steps, name="profile", matrix={"strategy": "local_sgd"},
                                strategy_options={"local_sgd": {"tau": 100_000}}), results)
            rows.setdefault("profile (compute only)", []).append(profile)
            real = _run(_doc(hosts, args.steps, name="real", matrix={"network": args.cap}), results)
            rows.setdefault(f"real, allreduce over {args.cap}", []).append(real)
            alone, beside = compute_s(profile), compute_s(real)  # read from the runs' records once
            step = profile["step_time_p50_s"]
            update = max(0.0, step - alone)  # outside the passes: after the exchange in a real step
            contended = step + beside - alone
            computes.append(f"{step:.3f} / {alone:.3f} / {beside:.3f}")
            print(f"profile step, compute alone, compute in the real run (s): {computes[-1]}")
            for k in DILATIONS:
                rows.setdefault(f"emulated, k = {k}", []).append(
                    _emulated(hosts, args, results, f"emulated-k{k}", step, k, update))
            for k in DILATIONS:
                rows.setdefault(f"emulated with the real run's compute, k = {k}", []).append(
                    _emulated(hosts, args, results, f"emulated-real-compute-k{k}", contended, k, update))
            rows.setdefault("emulated with the real run's compute, no update share, k = 4", []).append(
                _emulated(hosts, args, results, "emulated-real-compute-spread-k4", contended, 4, 0.0))
    report(rows, args, computes)


def report(rows: dict[str, list[dict]], args: argparse.Namespace, computes: list[str]) -> None:
    real = statistics.median(r["throughput"] for r in rows[f"real, allreduce over {args.cap}"])
    lines = [f"| run | images/s (median of {args.rounds}) | / real | step p50 s | CPU busy | saturated |",
             "|---|---|---|---|---|---|"]
    for name, runs in rows.items():
        tp = statistics.median(r["throughput"] for r in runs)
        busy = statistics.median(r["host_cpu_busy"] for r in runs if r.get("host_cpu_busy") is not None) \
            if any(r.get("host_cpu_busy") is not None for r in runs) else float("nan")
        saturated = sum(bool(r.get("emulation_saturated")) for r in runs)
        lines.append(f"| {name} | {tp:.2f} | {tp / real:.3f} | {statistics.median(r['step_time_p50_s'] for r in runs):.3f}"
                     f" | {busy:.2f} | {saturated}/{len(runs)} |")
    machine = provenance.machine()
    text = (f"\n## Emulated cluster fidelity (benchmarks/emulated_cluster_fidelity.py)\n\n"
            f"ResNet-50 (tiny size: 25.6 M parameters, 102 MB of gradients), batch 8, 2 hosts x 1 rank (1 thread each),"
            f" link {args.cap}, {args.steps} measured steps, {args.rounds} rounds interleaved. Machine: "
            f"{machine.get('cpu_model')}, {machine.get('cpu_cores')} cores. Emulated rows sleep the profile's step "
            f"outside DDP's forward and backward compute after the exchange (update_share) unless said. Per "
            f"round, the profile's step, its forward and backward compute and the real run's, as DDP timed "
            f"them (s, slowest rank's median): "
            f"{'; '.join(computes)}.\n\n" + "\n".join(lines) + "\n")
    print(text)
    with open(HERE / "RESULTS.md", "a") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
