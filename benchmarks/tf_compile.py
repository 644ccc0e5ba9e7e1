"""TensorFlow step time with XLA compilation off and on, side by side (compile axis of tf_mwms).

Real harness runs (``run_sweep``): tf_mwms, ResNet-50 tiny and small, 1 process, batch 8, compile off
and on interleaved in one sweep per round; prints the median step times, their ratio (off / on: above 1
means XLA is faster) and XLA's compile time, and appends them to benchmarks/RESULTS.md with the machine
and its load (the machine may be shared: the ratio within a round is what to read, not the absolute times).

    .venv/bin/python benchmarks/tf_compile.py [--rounds 1] [--steps 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from harness.base.environment import own_tools_first
from harness.experiment import scenario
from harness.results import provenance
from harness.running.runner import run_sweep

HERE = Path(__file__).parent
SCENARIO = """
name = "tf-compile"
[settings]
warmup_steps = 2
measured_steps = {steps}
repeats = 1
timeout_s = 600
device = "cpu"
[matrix]
framework = "tf_mwms"
workload = "resnet50"
size = ["tiny", "small"]
procs_per_node = 1
batch_per_worker = 8
compile = ["off", "on"]
"""
HEADER = ("\n## TensorFlow XLA: step time with compile off and on (benchmarks/tf_compile.py)\n\n"
          "tf_mwms, ResNet-50, 1 process, batch 8, CPU; median measured step time; ratio = off / on "
          "(above 1: XLA faster); compile s = the first (compiling) step, kept out of the window.\n\n"
          "| when (UTC) | machine | size | rounds x steps | step s, compile off | step s, compile on | ratio off/on | "
          "compile s |\n|---|---|---|---|---|---|---|---|\n")


def main() -> None:
    own_tools_first()  # the environment's mpirun, torchrun, horovodrun, as `rosetta` does (not activated)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    found: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tf_compile.toml"
        path.write_text(SCENARIO.format(steps=args.steps))
        for _ in range(args.rounds):
            for row in run_sweep(scenario.load(path), Path(tmp) / "results"):
                if row["status"] != "ok":
                    raise SystemExit(f"{row['size']} compile {row['compile']}: {row['status']}: {row['reason']}")
                found.setdefault((row["size"], row["compile"]), []).append(row)
    machine = provenance.machine()
    where = f"{machine['cpu_model']} ({machine['cpu_cores']} cores, load {os.getloadavg()[0]:.1f})"
    lines = []
    for size in ("tiny", "small"):
        off = statistics.median(r["step_time_p50_s"] for r in found[(size, "off")])
        on = statistics.median(r["step_time_p50_s"] for r in found[(size, "on")])
        compile_s = statistics.median(r["compile_s"] for r in found[(size, "on")])
        print(f"resnet50/{size}: step {off:.4f} s (compile off) vs {on:.4f} s (XLA), ratio off/on {off / on:.2f}, "
              f"compile {compile_s:.1f} s")
        lines.append(f"| {provenance.utc_now()} | {where} | {size} | {args.rounds} x {args.steps} | {off:.4f} | "
                     f"{on:.4f} | {off / on:.2f} | {compile_s:.1f} |\n")
    results = HERE / "RESULTS.md"
    text = results.read_text() if results.exists() else ""
    if HEADER not in text:
        text += HEADER
    results.write_text(text + "".join(lines))


if __name__ == "__main__":
    main()
