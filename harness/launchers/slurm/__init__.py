"""SLURM: an sbatch script per run, submitted and waited for by ``sbatch_wait``; each task is one rank.

``srun`` starts one ``python -m harness.contract.worker`` per task; ranks find their rank and
world size from SLURM's variables (harness.contract.worker maps them) and meet at the first
node of the allocation. The run's folder must be on storage every node sees (as the
repository and its environment must), which is how clusters are set up.

With a ``container_runtime``, the ranks run in ``container_image``, by default the framework's
own (``FrameworkInfo.image``, built from ``docker/``; apptainer pulls it as ``docker://IMAGE``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from enum import Enum

from harness.base import escaping
from harness.base.errors import UserError
from harness.contract.spec import RunSpec
from harness.launchers import (
    LaunchCommand,
    LaunchRequest,
    framework_image,
    options,
    results_root,
    worker_argv,
    worker_env,
)
from harness.launchers.slurm import sbatch_wait

SCRIPT = "job.sbatch"
CLUSTER = True  # runs on a scheduler's nodes: `reproduce --at published` sets no limit from this machine


class ContainerRuntime(str, Enum):
    NONE = "none"
    PYXIS = "pyxis"  # NVIDIA's enroot + pyxis: srun --container-image
    APPTAINER = "apptainer"


@dataclass(frozen=True)
class Options:
    partition: str = ""
    account: str = ""
    gpus_per_node: int = field(default=0, metadata={"min": 0, "max": 64})
    cpus_per_task: int = field(default=0, metadata={"min": 0, "max": 4096})  # 0: SLURM's default
    time_limit_min: int = field(default=30, metadata={"min": 1, "max": 30 * 24 * 60})
    master_port: int = field(default=29500, metadata={"min": 1, "max": 65535})
    container_runtime: ContainerRuntime = ContainerRuntime.NONE
    container_image: str = ""  # "": the framework's own (FrameworkInfo.image)
    container_mounts: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})  # "src:dst"
    container_workdir: str = "/opt/rosetta"  # where the image holds the repository
    extra_sbatch: tuple[str, ...] = field(default=(), metadata={"allow_empty": True})  # e.g. ["--exclusive"]


def sbatch_quoted(value: str, where: str = "an #SBATCH line") -> str:
    """``value`` as one argument of an ``#SBATCH`` line (:func:`harness.base.escaping.sbatch_argument`); a
    line break in it is a UserError naming ``where`` it came from (never the value: it may be a path)."""
    try:
        return escaping.sbatch_argument(value)
    except escaping.LineBreak as problem:
        raise UserError(f"[launcher_options.slurm] {where}: {problem}") from None


def job_name(request: LaunchRequest) -> str:
    """Unique per run, so that ``scancel --name`` stops this run's job and no other."""
    return "rosetta-" + "-".join(request.run_dir.parts[-2:])


def script(request: LaunchRequest) -> str:
    """The sbatch script: resources as #SBATCH lines, the ranks started by one srun."""
    spec, opts = request.spec, options(request)
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job_name(request)}", f"#SBATCH --nodes={spec.nodes}",
             f"#SBATCH --ntasks-per-node={spec.procs_per_node}", f"#SBATCH --time={opts.time_limit_min}",
             # quoted as sbatch reads #SBATCH lines (quotes group, '#' outside them starts a comment): a
             # results path with a space or '#' stays one argument
             f"#SBATCH --output={sbatch_quoted(str(request.run_dir / 'slurm-%j.out'), 'the results folder')}",
             f"#SBATCH --chdir={sbatch_quoted(str(request.repo_root), 'the repository folder')}"]
    for flag, value in (("partition", opts.partition), ("account", opts.account),
                        ("gpus-per-node", opts.gpus_per_node), ("cpus-per-task", opts.cpus_per_task)):
        if value:
            lines.append(f"#SBATCH --{flag}={sbatch_quoted(str(value), flag.replace('-', '_'))}")
    lines += [f"#SBATCH {sbatch_quoted(extra, 'extra_sbatch')}" for extra in opts.extra_sbatch]  # each one option
    lines += ["set -euo pipefail", *sbatch_wait.exit_status_lines(request.run_dir),  # what sbatch_wait watches
              'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
              f"export MASTER_PORT={opts.master_port}",
              escaping.shell_line(srun_argv(request))]
    return "\n".join(lines) + "\n"


def container_image(request: LaunchRequest) -> str:
    """The image the ranks run in: ``container_image``, or else the framework's declared image
    (for apptainer as a ``docker://`` reference, which it pulls and converts)."""
    opts = options(request)
    if opts.container_image:
        return opts.container_image
    declared = framework_image(request)
    return f"docker://{declared}" if opts.container_runtime == ContainerRuntime.APPTAINER else declared


def srun_argv(request: LaunchRequest) -> list[str]:
    opts = options(request)
    results = str(results_root(request))
    mounts = [*opts.container_mounts, f"{results}:{results}"]  # the run's spec in, its records out
    if opts.container_runtime == ContainerRuntime.PYXIS:
        return ["srun", f"--container-image={container_image(request)}", f"--container-mounts={','.join(mounts)}",
                f"--container-workdir={opts.container_workdir}", "python", *worker_argv(request)]
    if opts.container_runtime == ContainerRuntime.APPTAINER:
        binds = [a for m in mounts for a in ("--bind", m)]
        return ["srun", "apptainer", "exec", *(["--nv"] if opts.gpus_per_node else []), *binds,
                "--pwd", opts.container_workdir, container_image(request), "python", *worker_argv(request)]
    return ["srun", request.rank_python, *worker_argv(request)]


def command(request: LaunchRequest) -> LaunchCommand:
    """``python -m harness.launchers.slurm.sbatch_wait SCRIPT``: submits the run's script and returns when the
    job ends, with its exit status (``sbatch --wait`` would notice the end up to 32 s late)."""
    path = request.run_dir / SCRIPT
    node_cpus = options(request).cpus_per_task * request.spec.procs_per_node or None
    return LaunchCommand((request.python, "-m", "harness.launchers.slurm.sbatch_wait", str(path)),
                         worker_env(request, node_cpus),
                         files={SCRIPT: script(request)}, abort=(("scancel", "--name", job_name(request)),))


def unsupported_reason(spec: RunSpec) -> str | None:
    if shutil.which("sbatch") is None:
        return "sbatch not found: no SLURM client here (rosetta run --dry-run writes the batch scripts)"
    return None
