"""Stores of a million rows: `rosetta report`, `history`, `dashboard` and `compare` on one results table of
``--rows`` rows (default 10^6), each verb in its own process, its wall time and peak resident memory.

The store is what several CI machines write over years: ``--machines`` hosts (default 4), ``--configs``
configurations (default 25), 3 repeats each, one sweep a machine a round, as many rounds as the rows take
(10^6 rows: 3,334 sweeps a machine, about 4.5 years at two a day). Every column a real run fills is filled
as `rosetta run` fills it (harness/results/row/): its spec (about 1.3 kB of JSON), 30 step times, versions,
provenance, telemetry, machine load; a sweep in 40 carries a slow host (per-rank columns). The figures are
made with a fixed seed, so that two runs of this script time the same store.

    python benchmarks/large_store.py [--rows 1000000] [--store /tmp/rosetta-large] [--verbs report,history]
        [--label after]

Prints one line per verb (seconds, peak RSS in MiB, exit status) and, with ``--append``, appends them to
benchmarks/RESULTS.md with the machine's load (``uptime``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

PARQUET = "results.parquet"  # harness.results.table.PARQUET (this process imports neither pandas nor the harness:
# a child's peak RSS counts the pages it was forked with, so that a parent holding the made store inflates it)

FRAMEWORKS = ("torch_ddp", "horovod_torch", "tf_mwms", "jax_pmap", "chainermn")
WORKLOADS = (("resnet50", "images"), ("bert", "sequences"), ("gpt2", "sequences"), ("resnet50", "images"),
             ("vgg16", "images"))
STEPS = 30  # measured steps a run


def _spec(config: int, framework: str, workload: str, repeat: int, nodes: int) -> str:
    """A spec as a run records it (the scenario's resolved settings; about 1.3 kB)."""
    return json.dumps({
        "batch_per_worker": 32, "compile": "off", "device": "cuda", "framework": framework, "launcher": "torchrun",
        "launcher_options": {"addresses": [], "hosts": [], "interface": "eth0", "remote": "ssh",
                             "rendezvous_port": 29400},
        "measured_steps": STEPS, "memory_format": "contiguous", "network": "unlimited", "nodes": nodes,
        "precision": "amp_fp16", "procs_per_node": 2, "repeat": repeat, "scenario": f"ci-nightly-{config % 5}",
        "seed": 0, "size": "large", "storage": "synthetic",
        "storage_options": {"cache_dir": "", "checkpoint": "off", "checkpoint_dir": "checkpoints",
                            "checkpoint_mb": 0.0, "endpoint_url": "", "layout": "files", "loader_workers": 4,
                            "metrics_url": "", "nfs_mount_port": 0, "nfs_version": 4, "remote": "", "stage_dir": "",
                            "url": "", "verify_fraction": 0.05},
        "strategy": "allreduce", "strategy_options": {}, "timeout_s": 600.0, "warmup_steps": 4,
        "workload": workload, "workload_options": {"hidden_size": 1024, "intermediate_size": 4096,
                                                   "num_heads": 16, "num_layers": 24, "seq_len": 128,
                                                   "vocab_size": 30522, "config": config}})


def make_store(folder: Path, rows: int, machines: int = 4, configs: int = 25, repeats: int = 3,
               seed: int = 7) -> Path:
    """Write a results table of about ``rows`` rows into ``folder`` (results.parquet only); returns its path."""
    import numpy as np
    import pandas as pd

    from harness.results import table as results

    rng = np.random.default_rng(seed)
    per_round = machines * configs * repeats
    rounds = -(-rows // per_round)
    n = rounds * per_round
    r_idx = np.repeat(np.arange(rounds), per_round)  # round, machine, config, repeat: the row's coordinates
    m_idx = np.tile(np.repeat(np.arange(machines), configs * repeats), rounds)
    c_idx = np.tile(np.repeat(np.arange(configs), repeats), rounds * machines)
    rep = np.tile(np.arange(repeats), rounds * machines * configs)
    start = dt.datetime(2022, 1, 1, tzinfo=dt.timezone.utc)
    hosts = [f"ci-gpu-{m:02d}" for m in range(machines)]
    sweep_names = np.array([f"{(start + dt.timedelta(hours=12 * r)).strftime('%Y%m%dT%H%M%SZ')}-{m:02x}{r % 4096:04x}"
                            for r in range(rounds) for m in range(machines)], dtype=object)
    sweep = sweep_names[r_idx * machines + m_idx]
    config_ids = np.array([f"{(c * 2654435761) % 16**12:012x}" for c in range(configs)], dtype=object)
    fw = np.array([FRAMEWORKS[c % len(FRAMEWORKS)] for c in range(configs)], dtype=object)[c_idx]
    wl = np.array([WORKLOADS[(c // len(FRAMEWORKS)) % len(WORKLOADS)][0] for c in range(configs)], dtype=object)
    unit = np.array([WORKLOADS[(c // len(FRAMEWORKS)) % len(WORKLOADS)][1] for c in range(configs)], dtype=object)
    nodes = 1 + (np.arange(configs) % 2)
    level = 0.08 * (1 + 0.1 * np.arange(configs))[c_idx] * (1 + 0.03 * m_idx)
    level = level * np.where(r_idx > rounds * 0.8, 1.08, 1.0)  # a step down late in the store's life
    launch = level * np.exp(rng.normal(0, 0.02, n))
    steps = launch[:, None] * (1 + np.abs(rng.normal(0, 0.02, (n, STEPS))))
    batch = 32 * 2 * nodes[c_idx]
    specs = {(c, r): _spec(c, FRAMEWORKS[c % len(FRAMEWORKS)], WORKLOADS[(c // 5) % 5][0], r, int(nodes[c]))
             for c in range(configs) for r in range(repeats)}
    stamp = np.array([(start + dt.timedelta(hours=12 * r, minutes=int(m))).isoformat() for r in range(rounds)
                      for m in range(machines)], dtype=object)[r_idx * machines + m_idx]
    slow = (r_idx % 40 == 39)
    frame = pd.DataFrame({
        "schema_version": results.SCHEMA_VERSION, "sweep_id": sweep,
        "run_id": [f"{s}/{c:03d}-{r}" for s, c, r in zip(sweep, c_idx, rep)],
        "config_id": config_ids[c_idx], "scenario": [f"ci-nightly-{c % 5}" for c in c_idx], "framework": fw,
        "workload": wl[c_idx], "size": "large", "nodes": nodes[c_idx], "procs_per_node": 2,
        "world_size": 2 * nodes[c_idx], "batch_per_worker": 32, "global_batch": batch, "strategy": "allreduce",
        "strategy_options": "{}", "storage": "synthetic", "launcher": "torchrun", "network": "unlimited",
        "precision": "amp_fp16", "memory_format": "contiguous", "compile": "off", "layout": "NCHW",
        "hosts": [json.dumps([hosts[m]]) for m in m_idx], "device_requested": "cuda", "device": "cuda",
        "repeat": rep, "warmup_steps": 4, "measured_steps": STEPS,
        "status": np.where(rng.random(n) < 0.01, "failed", "ok"),
        "throughput": batch * STEPS / steps.sum(axis=1), "sample_unit": unit[c_idx],
        "samples_measured": batch * STEPS, "window_s": steps.sum(axis=1),
        "step_time_p50_s": np.median(steps, axis=1), "step_time_p90_s": np.quantile(steps, 0.9, axis=1),
        "step_times_s": [json.dumps([round(float(t), 6) for t in row]) for row in steps],
        "cpu_util_pct": rng.uniform(80, 190, n), "rss_max_mb": rng.uniform(3000, 9000, n),
        "gpu_util_pct": rng.uniform(60, 99, n), "gpu_mem_max_mb": rng.uniform(9000, 70000, n),
        "gpu_power_w": rng.uniform(200, 650, n), "gpu_sm_clock_mhz": rng.uniform(1500, 1980, n),
        "telemetry_samples": 60, "other_cpu_share": rng.uniform(0, 0.1, n), "load_avg": rng.uniform(1, 12, n),
        "steal_share": 0.0, "cpu_mhz": rng.uniform(2000, 3500, n), "machine_busy": rng.random(n) < 0.02,
        "first_loss": rng.uniform(6, 8, n), "last_loss": rng.uniform(2, 6, n),
        "peak_rss_mb": rng.uniform(3000, 9000, n), "rank_peak_rss_mb": "[4012.5, 3998.1]",
        "model_flops_per_sample": 2.4e10, "achieved_tflops": rng.uniform(50, 300, n), "peak_tflops": 989.0,
        "peak_source": "harness/machines/peaks.toml: h100 sxm bf16 dense", "peak_devices": 2 * nodes[c_idx],
        "mfu": rng.uniform(0.05, 0.3, n), "weights_consistent": True,
        "weights_checksum": "sha256:9f2c" + "0" * 60, "parameters": 335_000_000, "compile_s": rng.uniform(1, 9, n),
        "launch_s": rng.uniform(3, 20, n), "framework_version": "2.13.0",
        "versions": json.dumps({"torch": "2.13.0", "numpy": "2.3.1", "nccl": "2.27.3", "cuda": "13.0"}),
        "host": [hosts[m] for m in m_idx], "os": "Linux-6.8.0-49-generic-x86_64-with-glibc2.39",
        "cpu_model": "AMD EPYC 9654 96-Core Processor", "cpu_cores": 192, "gpu_model": "NVIDIA H100 80GB HBM3",
        "gpu_count": 8, "gpu_driver": "580.65.06", "mpi": "Open MPI 5.0.7", "harness_version": "0.9.0",
        "harness_commit": "317de0c" + "0" * 33, "timestamp": stamp,
        "spec": [specs[(c, r)] for c, r in zip(c_idx, rep)],
        "run_dir": [f"/srv/ci/rosetta/results/runs/{s}/{c:03d}-{r}" for s, c, r in zip(sweep, c_idx, rep)],
        "slowest_rank": np.where(slow, 1, pd.NA), "slowest_host": np.where(slow, [hosts[m] for m in m_idx], None),
        "straggler_score": np.where(slow, 1.3, np.nan), "attribution_phase": np.where(slow, "compute", None),
        "environment": json.dumps({"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": "8"}),
    })
    frame = results.frame_of(results.RESULTS, frame.iloc[:rows])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / results.PARQUET
    results.write_parquet(frame, path)  # as append_table writes it
    return path


VERBS = {  # verb -> its command line over the store (the folder) and the files it writes under out
    "report": lambda store, out: ["report", "--results", str(store), "--sweep", "latest-of-store",
                                  "--chart", str(out / "report.png")],
    "history": lambda store, out: ["history", "--results", str(store), "--chart", str(out / "history.png"),
                                   "--last", "30"],
    "dashboard": lambda store, out: ["dashboard", "--results", str(store), "--out", str(out / "site"), "--last", "30"],
    "compare": lambda store, out: ["compare", str(store), str(store)],
}


def timed(argv: list[str], code_root: Path = ROOT) -> tuple[float, float, int, str]:
    """Seconds, peak RSS (MiB) and exit status of ``python -m harness.cli`` with ``argv``, in its own process,
    with the harness of ``code_root`` (a checkout: the code before a change, for its figures)."""
    code = ("import resource, runpy, sys; sys.argv = ['rosetta', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('harness.cli', run_name='__main__')\n"
            "finally:\n    sys.stderr.write(f\"\\nPEAK_RSS_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n\")")
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=code_root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(code_root), "COLUMNS": "200"})
    seconds = time.perf_counter() - began
    peak = [line for line in done.stderr.splitlines() if line.startswith("PEAK_RSS_KB ")]
    rss = int(peak[-1].split()[1]) / 1024 if peak else float("nan")
    tail = (done.stderr.strip().splitlines() or [""])
    tail = [line for line in tail if not line.startswith("PEAK_RSS_KB")]
    return seconds, rss, done.returncode, (tail[-1] if tail else "")[:160]


def latest_sweep(store: Path) -> str:
    """The store's newest sweep (by its rows' timestamps), found in a child process."""
    code = ("import sys, pyarrow.parquet as pq; t = pq.read_table(sys.argv[1], columns=['sweep_id', 'timestamp'])"
            ".to_pandas(); print(t.sort_values('timestamp')['sweep_id'].iloc[-1])")
    return subprocess.run([sys.executable, "-c", code, str(store / PARQUET)], capture_output=True, text=True,
                          check=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--store", type=Path, default=Path("/tmp/rosetta-large-store"))
    parser.add_argument("--verbs", default=",".join(VERBS))
    parser.add_argument("--label", default="", help="what the figures are of (e.g. before, after), for RESULTS.md")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose harness runs the verbs "
                                                                  "(default: this one)")
    parser.add_argument("--append", action="store_true", help="append the figures to benchmarks/RESULTS.md")
    parser.add_argument("--make-only", action="store_true", help=argparse.SUPPRESS)  # the child that makes it
    args = parser.parse_args()
    store = args.store / f"rows-{args.rows}"
    if args.make_only:
        make_store(store, args.rows)
        return 0
    if not (store / PARQUET).exists():
        began = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--make-only", "--rows", str(args.rows), "--store",
                        str(args.store)], check=True)
        print(f"made {store / PARQUET} ({(store / PARQUET).stat().st_size / 2**20:.0f} MiB) in "
              f"{time.perf_counter() - began:.0f} s", flush=True)
    out = args.store / "out"
    out.mkdir(parents=True, exist_ok=True)
    sweep = latest_sweep(store)
    lines = []
    for verb in args.verbs.split(","):
        argv = [sweep if a == "latest-of-store" else a for a in VERBS[verb](store, out)]
        load = os.getloadavg()[0]
        seconds, rss, rc, tail = timed(argv, args.code)
        line = (f"| {args.label} | {verb} | {args.rows:,} | {seconds:.1f} | {rss:,.0f} | {rc} | {load:.1f} |")
        print(line + (f"  ({tail})" if rc not in (0, 1) else ""), flush=True)
        lines.append(line)
    if args.append:
        with open(HERE / "RESULTS.md", "a") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
