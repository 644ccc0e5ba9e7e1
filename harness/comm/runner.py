"""``rosetta comm``: launch the collective microbenchmark for every backend and world size, one
launch each, through the same launchers as training, and turn the event records into rows.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from harness import launchers
from harness.comm import bandwidth as comm_bandwidth, results as comm_results
from harness.comm.settings import CommSettings, expand
from harness.contract.axes import Backend, Collective, Device, Status
from harness.contract.events import events_path, read_rank
from harness.contract.spec import CommSpec, write_comm_spec_file
from harness.launchers import LaunchRequest
from harness.results import metrics, provenance, redact
from harness.running import collect, execute
from harness.running.runner import _new_run_dir, new_sweep_id

WORKER_MODULE = "frameworks.torch_ddp.comm_benchmark.worker"
PROBE_MODULE = "frameworks.torch_ddp.comm_benchmark.available_backends"


def probe_backends() -> dict[str, Any]:
    """What torch.distributed offers here (run in a subprocess: the harness does not import torch)."""
    if importlib.util.find_spec("torch") is None:
        return {"torch": None}
    out = subprocess.run([sys.executable, "-m", PROBE_MODULE], cwd=provenance.REPO_ROOT, capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"torch": None, "error": f"probe failed: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def backend_device(backend: Backend) -> str:
    """Where a backend's buffers live: NCCL on GPUs, the others on CPUs."""
    return "cuda" if backend == Backend.NCCL else "cpu"


def skip_reason(backend: Backend, world_size: int, requested: Device, found: dict[str, Any],
                launcher: str = "torchrun") -> str | None:
    """Why ``backend`` cannot be measured here at ``world_size`` started by ``launcher``, or None."""
    if backend == Backend.HOROVOD:
        if importlib.util.find_spec("horovod") is None:
            return "not installed: horovod"
        return "horovod is installed but there is no Horovod comm worker yet (frameworks/horovod)"
    if found.get("torch") is None:
        return found.get("error") or "not installed: torch (install the torch extra)"
    if backend == Backend.GLOO:
        if requested == Device.CUDA:
            return "device = cuda requested; gloo is measured on CPU buffers"
        return None if found.get("gloo") else "torch built without gloo"
    if backend == Backend.NCCL:
        if requested == Device.CPU:
            return "device = cpu requested; NCCL runs on GPUs"
        if not found.get("cuda"):
            return "no CUDA device here (NCCL runs on GPUs)"
        if not found.get("nccl"):
            return "torch built without NCCL"
        if world_size > found.get("gpu_count", 0):
            return f"needs {world_size} GPUs, {found.get('gpu_count', 0)} here"
        return None
    if not found.get("mpi"):
        return "torch built without MPI (torch.distributed.is_mpi_available() is False)"
    return None if launcher == "mpirun" else "the MPI backend needs launcher = \"mpirun\""


def run_comm(settings: CommSettings, results_dir: Path,
             on_launch: Callable[[Backend, int, str | None], None] | None = None) -> list[dict[str, Any]]:
    """Measure every backend x world size of ``settings``; rows appended to ``comm.parquet`` per launch."""
    found = probe_backends()
    sweep_id = new_sweep_id()
    results_dir = Path(results_dir).absolute()  # the ranks start in the repository, not here
    sweep_dir = results_dir / "runs" / f"comm-{sweep_id}"
    rows: list[dict[str, Any]] = []
    for backend in settings.backends:
        for world_size in settings.world_sizes:
            spec = expand(settings, backend, world_size, backend_device(backend))
            reason = (skip_reason(backend, world_size, settings.device, found, settings.launcher)
                      or launchers.unsupported_reason(spec.launcher, spec))  # type: ignore[arg-type]
            if on_launch:
                on_launch(backend, world_size, reason)
            run_dir = _new_run_dir(sweep_dir)
            if reason:
                new = [_row(spec, run_dir, sweep_id, Status.SKIPPED, reason)]
            else:
                try:
                    new = run_launch(spec, run_dir, sweep_id)
                except KeyboardInterrupt:  # execute.run has ended the launch's processes
                    comm_results.append(results_dir, [_row(spec, run_dir, sweep_id, Status.INTERRUPTED,
                                                           "interrupted by the user (Ctrl-C)")])
                    raise
            new = [redact.scrub_row(r) for r in new]
            comm_results.append(results_dir, new)
            rows += new
    return rows


def run_launch(spec: CommSpec, run_dir: Path, sweep_id: str, keep_shaping: bool = False) -> list[dict[str, Any]]:
    """One launch: every collective and size of ``spec``; one row per (collective, size), or one failure row.
    ``keep_shaping``: the hosts' links are left as they are (the launcher's set-up would lift their caps: the
    doctor shapes them as a scenario's faults do, harness/doctor/probes.py)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_file = run_dir / "spec.json"
    write_comm_spec_file(spec_file, spec, run_dir)
    request = LaunchRequest(spec=spec, worker_module=WORKER_MODULE, spec_file=spec_file,  # type: ignore[arg-type]
                            python=sys.executable, cpu_count=os.cpu_count() or 1, repo_root=provenance.REPO_ROOT)
    command = launchers.get(spec.launcher)(request)
    if keep_shaping:
        command = dataclasses.replace(command, setup=())
    for name, text in command.files.items():
        (run_dir / name).write_text(text)
    (run_dir / "command.json").write_text(json.dumps({"argv": [redact.scrub(a) for a in command.argv],
                                                      "env": redact.scrub_env(command.env)}, indent=2))
    outcome = execute.run(command, cwd=provenance.REPO_ROOT, log_path=run_dir / "launcher.log",
                          timeout_s=spec.timeout_s)
    ranks = [read_rank(run_dir, r) for r in range(spec.world_size)]
    facts = _facts(ranks)
    redact.scrub_folder(run_dir)
    if outcome.setup_failure:
        return [_row(spec, run_dir, sweep_id, Status.FAILED, f"setup command failed: {outcome.setup_failure}",
                     launch_s=outcome.seconds, **facts)]
    if outcome.timed_out:
        return [_row(spec, run_dir, sweep_id, Status.TIMEOUT, f"no exit within {spec.timeout_s:g} s",
                     launch_s=outcome.seconds, **facts)]
    if outcome.returncode != 0 or any(r.end is None for r in ranks):
        reason = collect._clip(f"launcher exit code {outcome.returncode}; "
                               f"{collect.failure_story(run_dir, ranks)}")
        return [_row(spec, run_dir, sweep_id, Status.FAILED, reason, launch_s=outcome.seconds, **facts)]
    per_rank = [comm_records(run_dir, r) for r in range(spec.world_size)]
    rows = []
    for key, first in per_rank[0].items():
        collective, size = key
        slowest = metrics.step_times([records[key]["seconds"] for records in per_rank])
        rows.append(_row(spec, run_dir, sweep_id, Status.OK, None, launch_s=outcome.seconds,
                         collective=collective, bytes=size, iters=first["iters"],
                         **timing_fields(Collective(collective), size, slowest, spec.world_size), **facts))
    return rows


def comm_records(run_dir: Path, rank: int) -> dict[tuple[str, int], dict[str, Any]]:
    """A rank's ``comm`` records keyed by (collective, bytes)."""
    found = {}
    for line in events_path(run_dir, rank).read_text().splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev.get("event") == "comm":
            found[(ev["collective"], int(ev["bytes"]))] = ev
    return found


def timing_fields(collective: Collective, size: int, slowest: list[float], world_size: int) -> dict[str, Any]:
    """Row fields from the per-iteration slowest-rank times (s) of one collective and size."""
    p50 = metrics.percentile(slowest, 50)
    return {"time_p50_s": p50, "time_mean_s": statistics.fmean(slowest), "time_min_s": min(slowest),
            "time_p90_s": metrics.percentile(slowest, 90),
            "algbw_GBps": comm_bandwidth.algbw(size, p50) / 1e9,
            "busbw_GBps": comm_bandwidth.busbw(collective, size, p50, world_size) / 1e9,
            "times_s": json.dumps(slowest)}


def _facts(ranks) -> dict[str, Any]:
    hello = next((r.hello for r in ranks if r.hello), None)
    if not hello:
        return {}
    return {"versions": json.dumps(hello.get("versions", {}), sort_keys=True), "gpu_model": hello.get("gpu_model"),
            "gpu_count": hello.get("gpu_count")}


def _row(spec: CommSpec, run_dir: Path, sweep_id: str, status: Status, reason: str | None,
         **fields: Any) -> dict[str, Any]:
    return {"schema_version": comm_results.COMM_SCHEMA_VERSION, "sweep_id": sweep_id,
            "run_id": f"comm-{sweep_id}/{run_dir.name}", "backend": spec.backend.value, "device": spec.device,
            "launcher": spec.launcher, "nodes": spec.nodes, "procs_per_node": spec.procs_per_node,
            "world_size": spec.world_size, "dtype": "float32", "warmup_iters": spec.warmup_iters,
            "status": status.value, "reason": reason, "timestamp": provenance.utc_now(), "run_dir": str(run_dir),
            **{k: v for k, v in provenance.machine().items()}, **fields}
