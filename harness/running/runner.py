"""Run a sweep: every expanded run in its own launch, one row each, appended as it ends."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import secrets
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import frameworks
from harness import launchers
from harness.base import nofollow, python_envs
from harness.base.errors import UserError
from harness.contract.axes import Status
from harness.contract.events import latest_step, read_rank
from harness.contract.spec import RunSpec, write_spec_file
from harness.contract.workloads import WORKLOADS
from harness.experiment import strategies
from harness.experiment.matrix import expand
from harness.experiment.scenario import Scenario
from harness.launchers import LaunchRequest
from harness.results import integrity, provenance, redact, table as results, utilization
from harness.running import collect, execute, storage_rules
from harness.storage import backends


class Observer(Protocol):
    """Receives progress while a sweep runs (the CLI draws it; tests may pass None)."""

    def run_started(self, index: int, total: int, spec: RunSpec) -> None: ...
    def step(self, spec: RunSpec, event: dict[str, Any]) -> None: ...
    def run_finished(self, row: dict[str, Any]) -> None: ...


def new_sweep_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


# A run that ended with one of these has its result; --resume does not run it again.
# A diverged run is a result too (it learned nothing, with this seed and these options).
COMPLETED = frozenset({Status.OK.value, Status.DIVERGED.value})


def run_sweep(scenario: Scenario, results_dir: Path, observer: Observer | None = None,
              resume: bool = False, max_workers: int | None = None) -> list[dict[str, Any]]:
    """Run every run of ``scenario``; each row is appended to the table as soon as its run ends.

    With ``resume``, the latest sweep of this scenario in ``results_dir`` goes on
    under its own id, and only its runs that have not completed are run.
    A KeyboardInterrupt stops the sweep after recording the current run as ``interrupted``.
    A run of more than ``max_workers`` workers (the GPUs reachable) is a ``skipped`` row.
    """
    # absolute: the ranks start in the repository, not where the sweep was started
    results_dir = Path(results_dir).absolute()
    specs = expand(scenario)
    if resume:
        # what a killed harness left in clear, first, whether or not the resume goes on (a sweep another
        # harness holds is left alone: its runs are not over)
        scrub_unfinished(results_dir)
        sweep_id, _ = resumable_sweep(results_dir, scenario.name)
    else:
        sweep_id = new_sweep_id()
        results.load(results_dir)  # an unreadable table is refused now, not after the first run spent its time
    integrity.writable_folder(results_dir)  # and a folder no row could be written to
    sweep_dir = results_dir / "runs" / integrity.checked_id(sweep_id, f"{results_dir}: sweep_id")
    # held from reading what is done to the last run: a second --resume at once would run the same runs
    with sweep_lock(results_dir, sweep_dir):
        if resume:
            done = completed(results_dir, sweep_id)
            check_same_plan(results_dir, sweep_id, specs)
            specs = [s for s in specs if (s.config_id(), s.repeat) not in done]
        else:
            write_plan(sweep_dir, scenario.name, specs)
        return _run_all(specs, results_dir, sweep_dir, sweep_id, scenario, observer, max_workers)


def _run_all(specs: list[RunSpec], results_dir: Path, sweep_dir: Path, sweep_id: str, scenario: Scenario,
             observer: Observer | None, max_workers: int | None) -> list[dict[str, Any]]:
    rows = []
    ledger = storage_rules.Ledger(repeats=scenario.settings.repeats)  # what the page-cache flag and the rules follow
    for index, spec in enumerate(specs):
        if observer:
            observer.run_started(index, len(specs), spec)
        run_dir = _new_run_dir(sweep_dir)
        try:
            row = run_one(spec, run_dir, sweep_id, observer, max_workers, ledger)
        except KeyboardInterrupt:
            row = _row(spec, run_dir, sweep_id, Status.INTERRUPTED, "interrupted (Ctrl-C, SIGTERM or SIGHUP)")
            rows.append(_record(results_dir, run_dir, row, observer))
            raise
        rows.append(_record(results_dir, run_dir, row, observer))
    return rows


def resumable_sweep(results_dir: Path, scenario_name: str) -> tuple[str, set[tuple[str, int]]]:
    """The latest sweep of ``scenario_name`` and its completed (config_id, repeat) pairs."""
    table = results.load(results_dir)
    mine = table[table["scenario"] == scenario_name]
    if mine.empty:
        raise UserError(f"--resume: no earlier sweep of scenario {scenario_name!r} in {results_dir}")
    sweep_id = mine.sort_values("timestamp")["sweep_id"].iloc[-1]
    return sweep_id, completed(results_dir, sweep_id, table)


def completed(results_dir: Path, sweep_id: str, table=None) -> set[tuple[str, int]]:
    """The (config_id, repeat) pairs of ``sweep_id`` that have their result."""
    table = results.load(results_dir) if table is None else table
    sweep = table[(table["sweep_id"] == sweep_id) & table["status"].isin(COMPLETED)]
    return set(zip(sweep["config_id"], sweep["repeat"].astype(int)))


SWEEP_LOCK = ".sweep.lock"  # runs/<sweep>/.sweep.lock: held by the harness running or resuming the sweep


@contextmanager
def sweep_lock(results_dir: Path, sweep_dir: Path):
    """Hold ``sweep_dir``'s lock (made, with the folder, if missing) or refuse in one line: another harness runs
    or resumes that sweep. The lock is the kernel's (flock): it goes with the process, a kill included."""
    nofollow.make_folder(sweep_dir, within=results_dir)
    fd = os.open(sweep_dir / SWEEP_LOCK, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise UserError(f"--resume: sweep {sweep_dir.name} is being run or resumed by another rosetta (pid "
                            f"{holder}); wait for it to end, then resume what is still missing") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


PLAN = "plan.json"  # runs/<sweep>/plan.json: the configurations a sweep was started with
PLAN_FORMAT = 1


def write_plan(sweep_dir: Path, scenario_name: str, specs: list[RunSpec]) -> None:
    """Record the configurations a sweep runs, so that ``--resume`` can tell an edited scenario."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    plan = {"format": PLAN_FORMAT, "scenario": scenario_name,
            "config_ids": sorted({s.config_id() for s in specs}), "repeats": max(s.repeat for s in specs) + 1}
    results.atomic_write(sweep_dir / PLAN, lambda p: Path(p).write_text(json.dumps(plan, indent=2)))


def check_same_plan(results_dir: Path, sweep_id: str, specs: list[RunSpec]) -> None:
    """Refuse (one line) to resume ``sweep_id`` with configurations other than those it was started with (a
    scenario edited since: a seed, an axis, an option), which would put two plans under one sweep id. A
    sweep from before plan records: its rows' configurations must all be the scenario's."""
    planned = {s.config_id() for s in specs}
    path = results_dir / "runs" / sweep_id / PLAN
    try:
        recorded = set(json.loads(path.read_text())["config_ids"])
    except (OSError, ValueError, KeyError, TypeError):
        table = results.load(results_dir)
        recorded = set(table.loc[table["sweep_id"] == sweep_id, "config_id"].dropna()) | planned
    if recorded != planned:
        changed = len(recorded ^ planned)
        raise UserError(f"--resume: the scenario's configurations differ from those sweep {sweep_id} was started "
                        f"with ({changed} differ: the scenario was edited); run without --resume to start a "
                        f"new sweep")


def scrub_unfinished(results_dir: Path, held: Path | None = None) -> list[Path]:
    """Scrub the folders of runs that never got their row (a harness killed mid-run leaves its logs as the
    workers wrote them, secrets included); returns the files rewritten. A sweep another harness is running
    (its lock held; ``held``: this one's own) is left alone: its runs are not over."""
    rewritten = []
    busy = {d for d in Path(results_dir).glob("runs/*") if d != held and _running(d)}
    for run_dir in sorted(Path(results_dir).glob("runs/*/*")):
        if run_dir.parent in busy:
            continue
        if run_dir.is_dir() and not run_dir.is_symlink() and not (run_dir / "row.json").exists():
            # with the secrets the killed run recorded at launch: this shell may lack its variables (issue 52)
            record = redact.recorded_secrets(run_dir)
            rewritten += redact.scrub_folder(run_dir, record=record)
            if record is None:  # a run from before the record (or a damaged one): its secrets are unknown here,
                _make_private(run_dir / LAUNCHER_LOG)  # so its log is not made readable to others
            else:
                _make_readable(run_dir / LAUNCHER_LOG)
    return rewritten


LAUNCHER_LOG = "launcher.log"


def _make_private(path: Path) -> None:
    if path.is_file() and not path.is_symlink():
        os.chmod(path, 0o600)


def _running(sweep_dir: Path) -> bool:
    """Whether a harness holds ``sweep_dir``'s lock now."""
    try:
        fd = os.open(sweep_dir / SWEEP_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: a sweep from before locks, or not a sweep's folder
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _make_readable(path: Path) -> None:
    """Give a scrubbed log the mode ordinary files get (it was private while it could hold secrets in clear)."""
    if path.is_file() and not path.is_symlink():
        os.chmod(path, 0o666 & ~results.umask())


def _new_run_dir(sweep_dir: Path) -> Path:
    """The sweep's next run folder: numbered in order, never one an earlier attempt used."""
    taken = [int(p.name) for p in sweep_dir.glob("[0-9]" * 4)] if sweep_dir.exists() else []
    return sweep_dir / f"{max(taken, default=-1) + 1:04d}"


def _record(results_dir: Path, run_dir: Path, row: dict[str, Any], observer: Observer | None) -> dict[str, Any]:
    """Persist a finished run's row (scrubbed of secrets, as its folder is), tell the observer, return it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    redact.scrub_folder(run_dir, public=redact.public_values(row), record=redact.recorded_secrets(run_dir))
    _make_readable(run_dir / LAUNCHER_LOG)
    (run_dir / redact.RECORD).unlink(missing_ok=True)  # scrubbed: the record has served
    row = redact.scrub_row(row)
    results.write_row_json(run_dir / "row.json", row)
    results.append(results_dir, [row])
    if observer:
        observer.run_finished(row)
    return row


def skip_reason(spec: RunSpec, max_workers: int | None = None) -> str | None:
    """Why ``spec`` cannot run here (unsupported combination, launcher or missing package, more
    workers than the ``max_workers`` reachable), or None."""
    if max_workers is not None and spec.world_size > max_workers:
        return f"needs {spec.world_size} workers (GPUs); {max_workers} reachable here (--gpus)"
    info = frameworks.get(spec.framework)
    # a launcher that runs the ranks in the framework's image needs nothing of it here
    in_image = getattr(launchers.module(spec.launcher), "IN_IMAGE", False)
    missing = [] if in_image else info.missing_modules(spec.workload)
    unmade = None if in_image or info.environment is None else python_envs.not_made_reason(info.environment)
    client = backends.REGISTRY.get(spec.storage.value)  # none for synthetic data
    missing_client = [] if in_image or client is None else client.missing(spec.storage_options)
    return (info.unsupported_reason(spec.workload, spec.strategy, spec.storage, spec.launcher, spec.device)
            or info.unsupported_numerics(spec.workload, spec.precision, spec.memory_format, spec.compile,
                                         spec.device)
            or info.unsupported_exchange(spec.strategy, spec.emulation)
            or launchers.unsupported_reason(spec.launcher, spec)
            or strategies.placement_reason(spec.strategy, spec.strategy_options, spec.nodes, spec.world_size)
            or strategies.shard_reason(spec.strategy, spec.workload_options, spec.world_size)
            or unmade
            or (f"not installed: {', '.join(missing)} (install the {spec.framework} extra)" if missing else None)
            or (f"storage {spec.storage.value} needs the Python package {', '.join(missing_client)} (pip install "
                f"{' '.join(missing_client)}{client.install_hint})" if missing_client else None))


def prepare(spec: RunSpec, run_dir: Path, within: Path | None = None) -> launchers.LaunchCommand:
    """Write the run's spec file, launcher files and command record; return what would run. No link in
    ``run_dir`` or in its folders below ``within`` (the results or --out folder) is written through."""
    info = frameworks.get(spec.framework)
    nofollow.make_folder(run_dir, within)
    spec_file = run_dir / "spec.json"
    write_spec_file(spec_file, spec, run_dir)
    request = LaunchRequest(spec=spec, worker_module=info.worker_module, spec_file=spec_file,
                            python=sys.executable, cpu_count=os.cpu_count() or 1, repo_root=provenance.REPO_ROOT,
                            worker_python=python_envs.worker_python(info.environment, ""))
    command = launchers.get(spec.launcher)(request)
    for name, text in command.files.items():
        nofollow.write(run_dir / name, text)
    scrub_all = lambda argvs: [[redact.scrub(a) for a in argv] for argv in argvs]  # noqa: E731
    record = {"argv": scrub_all([command.argv])[0], "env": redact.scrub_env(command.env),
              "files": sorted(command.files), "setup": scrub_all(command.setup), "also": scrub_all(command.also),
              "abort": scrub_all(command.abort)}
    nofollow.write(run_dir / "command.json", json.dumps(record, indent=2))
    return command


def run_one(spec: RunSpec, run_dir: Path, sweep_id: str, observer: Observer | None = None,
            max_workers: int | None = None, ledger: storage_rules.Ledger | None = None) -> dict[str, Any]:
    """Launch one run and turn what it left into a row (never raises for a failed run). ``ledger``: what
    the sweep's earlier runs read and measured (the page-cache flag and MLPerf Storage's rules use it)."""
    reason = skip_reason(spec, max_workers)
    if reason:
        return _row(spec, run_dir, sweep_id, Status.SKIPPED, reason)
    ledger = ledger or storage_rules.Ledger()
    command = prepare(spec, run_dir)
    before = storage_rules.before_launch(spec, ledger)  # the page cache emptied last, right before the launch

    def tick() -> None:
        event = latest_step(run_dir, 0)
        if observer and event:
            observer.step(spec, event)

    # what a later scrub needs should this harness be killed (the secrets' hashes), then the log private until
    # scrubbed (a harness killed mid-run leaves it as the launch wrote it; --resume scrubs it)
    redact.record_secrets(run_dir, public=redact.public_values({**spec.dimensions(), "run_dir": str(run_dir)}))
    os.close(os.open(run_dir / LAUNCHER_LOG, os.O_CREAT | os.O_WRONLY, 0o600))
    outcome = execute.run(command, cwd=provenance.REPO_ROOT, log_path=run_dir / LAUNCHER_LOG,
                          timeout_s=spec.timeout_s, on_tick=tick)
    ranks = [read_rank(run_dir, rank) for rank in range(spec.world_size)]
    status, reason = collect.status_and_reason(spec, outcome, ranks, run_dir)
    fields = {**collect.worker_facts(ranks, frameworks.get(spec.framework).requires[0]), **collect.image_fields(run_dir)}
    if status != Status.OK and fields.get("image_id"):  # which image failed, where a container ran the ranks
        reason = f"in image {fields['image']} ({fields['image_id'][:19]}): {reason}"
    if status == Status.OK:
        fields.update(collect.measurement_fields(ranks, run_dir))
        fields.update(utilization.utilization_fields(spec, fields))
    if status in (Status.OK, Status.DIVERGED):  # a diverged run still shows how far it got
        fields.update(collect.accuracy_fields(ranks, spec.workload_options.get("target_accuracy")))
    fields.update(storage_rules.row_fields(spec, status, ranks, before, ledger))
    return _row(spec, run_dir, sweep_id, status, reason, launch_s=outcome.seconds, **fields)


def dry_run(scenario: Scenario, out_dir: Path,
            max_workers: int | None = None) -> list[tuple[RunSpec, Path, str | None]]:
    """Write every run's files (spec, batch script, manifests, command record) without launching, also
    where the engine is absent here (a batch script or manifest is written to be used elsewhere); a point
    needing more than ``max_workers`` workers gets none.

    Returns each run with its folder and, for a run that would be skipped here, why.
    """
    # absolute: the commands work from anywhere
    sweep_dir = integrity.writable_folder(Path(out_dir).absolute()) / "dry-run" / new_sweep_id()
    planned = []
    for index, spec in enumerate(expand(scenario)):
        run_dir = sweep_dir / f"{index:04d}"
        reason = skip_reason(spec, max_workers)
        if max_workers is None or spec.world_size <= max_workers:
            prepare(spec, run_dir, within=out_dir)
            # the same redaction as a real run's folder gets when its run ends (nothing runs here)
            redact.scrub_folder(run_dir, public=redact.public_values({**spec.dimensions(), "run_dir": str(run_dir)}))
        planned.append((spec, run_dir, reason))
    return planned


def _row(spec: RunSpec, run_dir: Path, sweep_id: str, status: Status, reason: str | None,
         **fields: Any) -> dict[str, Any]:
    return {
        "schema_version": results.SCHEMA_VERSION,
        "sweep_id": sweep_id,
        "run_id": f"{sweep_id}/{run_dir.name}",
        "config_id": spec.config_id(),
        **spec.dimensions(),
        "repeat": spec.repeat,
        "status": status.value,
        "reason": reason,
        "sample_unit": WORKLOADS[spec.workload].sample_unit,
        "timestamp": provenance.utc_now(),
        "spec": json.dumps(spec.to_json(), sort_keys=True),
        "strategy_options": json.dumps(dict(spec.strategy_options), sort_keys=True),
        "rules": spec.rules.value,
        "run_dir": str(run_dir),
        **provenance.machine(),
        **python_envs.row_fields(frameworks.get(spec.framework).environment),
        **fields,
    }
