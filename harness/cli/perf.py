"""Verbs about the measurement itself: ``rosetta comm`` (collective benchmark), ``rosetta doctor`` (the
cluster check) and ``rosetta project`` (the scaling model, its projection and its check against this
machine's runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.console import DEFAULT_RESULTS, chart_file, print_items


def _csv(kind):
    return lambda text: [kind(x) for x in text.split(",") if x.strip()]


def _bytes(text: str) -> int:
    """``4``, ``64K``, ``16M``, ``1G`` (powers of 1024) as bytes."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    try:
        value = float(text[:-1] if scale > 1 else text) * scale
        if not 0 < value < 1 << 50:  # NaN and infinity fail too (no message a petabyte long)
            raise ValueError(text)
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4, 64K, 16M, 1G)") from None


def add_parsers(sub) -> None:
    p = sub.add_parser("comm", help="collective microbenchmark: allreduce, broadcast, allgather bandwidth vs size")
    p.add_argument("file", nargs="?", type=Path, help="TOML file with a [comm] table (e.g. scenarios/comm.toml)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.add_argument("--backends", type=_csv(str), help="comma-separated: gloo,nccl,mpi,horovod")
    p.add_argument("--collectives", type=_csv(str), help="comma-separated: allreduce,broadcast,allgather")
    p.add_argument("--world-sizes", type=_csv(int), help="comma-separated ranks per launch (default 2)")
    p.add_argument("--min-bytes", type=_bytes, help="smallest message (default 4)")
    p.add_argument("--max-bytes", type=_bytes, help="largest message on GPUs (default 256M)")
    p.add_argument("--max-bytes-cpu", type=_bytes, help="largest message on CPUs (default 64M)")
    p.add_argument("--step-factor", type=int, help="each size is the previous x this (default 2)")
    p.add_argument("--launcher", help="launcher of every launch (default torchrun; mpirun for the MPI backend)")
    p.add_argument("--warmup-iters", type=int)
    p.add_argument("--iters", type=int)
    p.add_argument("--chart", type=Path, help="chart PNG (default: RESULTS/comm-<sweep>.png)")
    p.add_argument("--report", action="store_true", help="only report the latest comm sweep, measure nothing")
    p.set_defaults(handler=cmd_comm, runs_sweep=True)  # Ctrl-C records the current launch
    add_doctor_parser(sub)
    add_project_parser(sub)


def add_doctor_parser(sub) -> None:
    p = sub.add_parser("doctor", help="cluster check: each host's GPUs and network card, pairs, a ring and a "
                                      "bisection; names the slow host, link or GPU; exit 1 when it finds one")
    p.add_argument("hosts", nargs="*", help="hosts to check (ssh names, or network namespaces with --remote netns)")
    p.add_argument("--scenario", type=Path, help="take the hosts (and the workload, emulation and [faults]) from "
                                                 "this scenario's largest run")
    p.add_argument("--remote", choices=["ssh", "netns", "srun"], default="ssh",
                   help="how to reach HOSTS (default ssh); srun: as steps of the SLURM job this runs in "
                        "(salloc --nodes=N rosetta doctor --remote srun), HOSTS default the job's nodes")
    p.add_argument("--addresses", type=_csv(str), help="comma-separated rendezvous address of each of HOSTS")
    p.add_argument("--interface", default="eth0", help="the hosts' network interface (default eth0)")
    p.add_argument("--machine-type", help="the baseline's key in the store (default: derived from the hosts)")
    p.add_argument("--no-compute", action="store_true", help="the links only (no 1-rank step on each GPU)")
    p.add_argument("--bytes", type=_bytes, default=4 << 20, help="message of the bandwidth probes (default 4M)")
    p.add_argument("--iters", type=int, default=3, help="timed iterations per probe (default 3)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder: the store (default: results)")
    p.add_argument("--json", type=Path, help="also write the check as JSON here")
    p.add_argument("--junit", type=Path, help="also write JUnit XML here (a bad figure or failed probe a failure)")
    p.add_argument("--markdown", type=Path, help="also write a Markdown summary here")
    p.set_defaults(handler=cmd_doctor, gives_verdict=True)


def cmd_doctor(args: argparse.Namespace) -> int:
    from rich.console import Console

    from harness.base.errors import UserError
    from harness.doctor import check, probes, report
    from harness.launchers.hosts import RemoteShell
    from harness.results import integrity

    for flag in ("junit", "markdown", "json"):  # before anything is probed: a bad path is input, not a verdict
        if getattr(args, flag) is not None:
            integrity.writable_file(getattr(args, flag), f"--{flag}")
    if args.scenario and args.hosts or not (args.scenario or args.hosts or args.remote == "srun"):
        raise UserError("doctor: give HOSTS or --scenario (one of them)")
    if args.iters < 1:
        raise UserError(f"doctor: --iters must be >= 1, got {args.iters}")
    if args.scenario:
        cluster = probes.from_scenario(args.scenario)
    elif not args.hosts:  # --remote srun: the job's nodes
        cluster = probes.job_cluster(interface=args.interface)
    else:
        hosts = tuple(args.hosts)
        cluster = probes.Cluster(hosts, tuple(args.addresses or hosts), RemoteShell(args.remote), args.interface)
    done = check.run_check(cluster, args.results, compute=not args.no_compute, machine_type=args.machine_type,
                           big_bytes=args.bytes, iters=args.iters)
    report.print_report(done, Console())
    for path, text in ((args.json, report.json_text), (args.junit, report.junit_xml), (args.markdown, report.markdown)):
        if path:
            path.write_text(text(done))
    return done.exit_status


def cmd_comm(args: argparse.Namespace) -> None:
    from rich.console import Console

    from harness.base.errors import UserError
    from harness.comm import report as comm_report, results as comm_results
    from harness.comm.runner import run_comm
    from harness.comm.settings import load_settings

    chart = chart_file(args.chart)  # before the benchmark runs

    console = Console()
    if not args.report:
        settings = load_settings(args.file, backends=args.backends, collectives=args.collectives,
                                 world_sizes=args.world_sizes, min_bytes=args.min_bytes, max_bytes=args.max_bytes,
                                 max_bytes_cpu=args.max_bytes_cpu, step_factor=args.step_factor,
                                 warmup_iters=args.warmup_iters, iters=args.iters,
                                 launcher=args.launcher)

        def announce(backend, world, reason):
            note = f"[yellow]skipped[/yellow]: {reason}" if reason else "measuring"
            console.print(f"comm {backend.value} x{world}: {note}", highlight=False)

        run_comm(settings, args.results, announce)
    table = comm_report.latest_sweep(comm_results.load(args.results))
    if table.empty:
        raise UserError(f"{args.results}: no comm results yet; run `rosetta comm` first")
    comm_report.print_tables(table, console)
    sweep = table["sweep_id"].iloc[0]
    chart = comm_report.plot(table, chart or args.results / f"comm-{sweep}.png")
    console.print(f"chart: {chart}")
    console.print(f"table: {args.results / comm_results.PARQUET} (and {comm_results.CSV})")


def add_project_parser(sub) -> None:
    p = sub.add_parser("project", help="predict scaling efficiency at 8..1024 GPUs for an interconnect; "
                                       "--check: the model against this machine's measured runs")
    p.add_argument("--interconnect", default="25GbE", help="link between nodes: a preset (default 25GbE) or measured:BACKEND (this "
                        "machine's `rosetta comm` fit, e.g. measured:gloo)")
    p.add_argument("--intra", default="NVLink", help="link within a node: a preset (default NVLink) or measured:BACKEND")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--baseline", default="resnet50-v100", help="published single-GPU figure (a preset)")
    p.add_argument("--step-time-s", type=float, help="single-GPU step time (s), instead of the baseline's")
    p.add_argument("--batch", type=int, help="batch per GPU, instead of the baseline's")
    p.add_argument("--parameters", type=int, help="model parameters, instead of the baseline's")
    p.add_argument("--workers", type=_csv(int), help="GPU counts (default 8,16,...,1024)")
    p.add_argument("--tau", type=int, default=8, help="local SGD: steps between averagings (default 8)")
    p.add_argument("--servers", type=int, default=1, help="parameter_server: servers sharing the model (default 1)")
    p.add_argument("--overlap", type=float, default=0.0, help="share of communication hidden behind compute")
    p.add_argument("--presets", type=Path, help="presets TOML (default: harness/machines/interconnects.toml)")
    p.add_argument("--no-published", action="store_true", help="leave published results off the chart")
    p.add_argument("--chart", type=Path, help="chart PNG (default: RESULTS/project-<interconnect>.png)")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder (default: results)")
    p.add_argument("--check", action="store_true",
                   help="instead: the model's predictions against the measured runs on this machine")
    p.set_defaults(handler=cmd_project)


def cmd_project(args: argparse.Namespace) -> None:
    from harness.base.errors import UserError
    from harness.scaling import check as scaling_check, projection
    from harness.scaling.projection_report import ProjectionRequest, projection_report

    if not 0 <= args.overlap <= 1:
        raise UserError("--overlap must be within 0..1")
    if args.check:
        items = scaling_check.report(args.results, args.overlap)
        if items is None:
            raise UserError(f"{args.results}: needs comm results (`rosetta comm`) and training runs "
                            f"(`rosetta run`) to check the model against")
        print_items(items)
        return
    if args.tau < 1 or args.gpus_per_node < 1 or args.servers < 1:
        raise UserError("--tau, --gpus-per-node and --servers must be >= 1")
    print_items(projection_report(ProjectionRequest(
        results=args.results, interconnect=args.interconnect, intra=args.intra, gpus_per_node=args.gpus_per_node,
        baseline=args.baseline, step_time_s=args.step_time_s, batch=args.batch, parameters=args.parameters,
        workers=tuple(args.workers or projection.DEFAULT_WORKERS), tau=args.tau, servers=args.servers,
        overlap=args.overlap, presets=args.presets or projection.PRESETS_FILE, published=not args.no_published,
        chart=chart_file(args.chart))))
