"""``python -m harness.launchers.ray.driver MODULE SPEC``: a run's ranks as Ray actors (see
:mod:`harness.launchers.ray` for what each rank gets).

Run as ``-m``, this module is ``__main__``, so Ray sends the actor class to the nodes by value: the
nodes need Ray, the repository and its environment, never this module's import path. The actor's code
uses the standard library and Ray only. Ray and Horovod are imported inside functions: the harness
imports no framework at module level.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

MARKER = ".ray-driver"  # written into the run folder: a node that sees it shares the folder
GRACE_S = 30.0  # after a rank fails, how long the others get to end on their own before they are killed
LOCAL_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK")


class RankActor:
    """One rank on a Ray node: where it is, then the rank itself as a child process."""

    def facts(self, ports: int, marker: str) -> dict[str, Any]:
        """The node's address, interface, host name, the actor's GPUs, ``ports`` free ports, and whether
        it sees the driver's run folder."""
        import fcntl
        import socket
        import struct

        import ray

        ip = ray.util.get_node_ip_address()
        interface = ""
        for _, name in socket.if_nameindex():
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                    packed = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))  # SIOCGIFADDR
                if socket.inet_ntoa(packed[20:24]) == ip:
                    interface = name
                    break
            except OSError:
                continue
        held = []
        for _ in range(ports):  # held together: the ports differ
            sock = socket.socket()
            sock.bind(("", 0))
            held.append(sock)
        free = [s.getsockname()[1] for s in held]
        for sock in held:
            sock.close()
        return {"ip": ip, "interface": interface, "host": socket.gethostname(), "ports": free,
                "node": ray.get_runtime_context().get_node_id(), "gpus": [str(g) for g in ray.get_gpu_ids()],
                "shared": os.path.exists(marker)}

    def run(self, argv: list[str], env: dict[str, str], cwd: str, spec_doc: dict[str, Any] | None) -> tuple[int, dict]:
        """Run the rank; its exit status, and its records (path -> bytes) when it wrote them into a folder
        of its own (``spec_doc`` given: the run's folder is not on this node)."""
        import shutil
        import subprocess
        import tempfile

        folder = None
        if spec_doc is not None:
            folder = tempfile.mkdtemp(prefix="rosetta-rank-")
            spec_path = os.path.join(folder, "spec.json")
            with open(spec_path, "w") as out:
                json.dump({**spec_doc, "out_dir": folder}, out)
            argv = [*argv[:-1], spec_path]
        code = subprocess.run(argv, cwd=cwd, env={**os.environ, **env}).returncode
        records: dict[str, bytes] = {}
        if folder is not None:
            for root, _, files in os.walk(folder):
                for name in files:
                    path = os.path.join(root, name)
                    if path != os.path.join(folder, "spec.json"):
                        with open(path, "rb") as data:
                            records[os.path.relpath(path, folder)] = data.read()
            shutil.rmtree(folder, ignore_errors=True)
        return code, records


def placement(spec, opts) -> Any:
    """One bundle per node of the run, on distinct Ray nodes; ready, or a RuntimeError saying why."""
    import ray
    from ray.util.placement_group import placement_group

    bundle = {"CPU": opts.cpus_per_rank * spec.procs_per_node}
    if opts.gpus_per_rank:
        bundle["GPU"] = opts.gpus_per_rank * spec.procs_per_node
    group = placement_group([dict(bundle) for _ in range(spec.nodes)],
                            strategy="STRICT_SPREAD" if spec.nodes > 1 else "PACK")
    try:
        ray.get(group.ready(), timeout=opts.placement_timeout_s)
    except ray.exceptions.GetTimeoutError:
        raise RuntimeError(f"the Ray cluster had no room for {spec.nodes} node(s) of {bundle} on distinct nodes "
                           f"within {opts.placement_timeout_s} s (ray status shows its nodes)") from None
    return group


def start_actors(spec, opts, group) -> list[Any]:
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    remote = ray.remote(RankActor)
    return [remote.options(num_cpus=opts.cpus_per_rank, num_gpus=opts.gpus_per_rank,
                           scheduling_strategy=PlacementGroupSchedulingStrategy(
                               group, placement_group_bundle_index=rank // spec.procs_per_node)).remote()
            for rank in range(spec.world_size)]


def rank_envs(spec, opts, facts: list[dict[str, Any]], style: str, server: tuple[str, int] | None) -> list[dict]:
    """Each rank's variables: the harness's, torch.distributed's, and the framework's meeting (``style``:
    torch, tf or horovod, from its Kubernetes kind)."""
    from harness.contract.events import HOST_VARIABLE

    world, per_node = spec.world_size, spec.procs_per_node
    distinct_hosts = len({f["host"] for f in facts[::per_node]}) == spec.nodes
    envs = []
    for rank, fact in enumerate(facts):
        node, local = divmod(rank, per_node)
        interface = opts.network_interface or fact["interface"] or "lo"
        node_gpus = [g for f in facts[node * per_node:(node + 1) * per_node] for g in f["gpus"]]
        threads = str(max(1, opts.cpus_per_rank))
        env = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(local),
               "LOCAL_WORLD_SIZE": str(per_node), "NODE_RANK": str(node), "GROUP_RANK": str(node),
               "MASTER_ADDR": facts[0]["ip"], "MASTER_PORT": str(facts[0]["ports"][0]),
               "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1",
               "GLOO_SOCKET_IFNAME": interface, "NCCL_SOCKET_IFNAME": interface,
               # the node's GPUs, so that LOCAL_RANK picks this rank's own (Ray shows an actor only its own)
               "CUDA_VISIBLE_DEVICES": ",".join(node_gpus),
               HOST_VARIABLE: fact["host"] if distinct_hosts else f"{fact['host']}/ray-{fact['node'][:8]}"}
        if style == "tf" and spec.strategy.value != "parameter_server":  # a PS cluster's roles come from the ranks
            workers = [f"{f['ip']}:{f['ports'][-1]}" for f in facts]
            env["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}})
        if style == "horovod":
            env.update(horovod_env(rank, node, local, spec, interface, server))
        envs.append(env)
    return envs


def horovod_env(rank: int, node: int, local: int, spec, interface: str, server) -> dict[str, str]:
    """What horovodrun --gloo gives a rank (horovod.runner.gloo_run: the rendezvous and the slot)."""
    return {"HOROVOD_GLOO_RENDEZVOUS_ADDR": server[0], "HOROVOD_GLOO_RENDEZVOUS_PORT": str(server[1]),
            "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_IFACE": interface,
            "HOROVOD_HOSTNAME": f"node{node}", "HOROVOD_RANK": str(rank), "HOROVOD_SIZE": str(spec.world_size),
            "HOROVOD_LOCAL_RANK": str(local), "HOROVOD_LOCAL_SIZE": str(spec.procs_per_node),
            "HOROVOD_CROSS_RANK": str(node), "HOROVOD_CROSS_SIZE": str(spec.nodes)}


def rendezvous(spec, address: str):
    """Horovod's own Gloo rendezvous server (as horovodrun starts it), planned for the run's slots."""
    from horovod.runner.common.util.hosts import HostInfo, get_host_assignments
    from horovod.runner.http.http_server import RendezvousServer

    server = RendezvousServer()
    port = server.start()
    server.init(get_host_assignments([HostInfo(f"node{n}", spec.procs_per_node) for n in range(spec.nodes)],
                                     spec.world_size))
    return server, (address, port)


def wait(refs: list[Any], run_dir: Path) -> int:
    """Wait for every rank, writing gathered records into the run's folder; the first failure's status."""
    import ray

    status, pending, failed_at = 0, list(refs), None
    while pending:
        done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
        for ref in done:
            code, records = ray.get(ref)
            for name, data in records.items():
                (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
                (run_dir / name).write_bytes(data)
            if code != 0 and status == 0:
                status, failed_at = code, time.monotonic()
        if failed_at is not None and pending and time.monotonic() - failed_at > GRACE_S:
            print(f"ray_driver: {len(pending)} rank(s) still running {GRACE_S:.0f} s after one failed: stopped",
                  file=sys.stderr)
            return status
    return status


def main(argv: list[str]) -> int:
    import ray

    import frameworks
    from harness.contract.spec import read_spec_file
    from harness.launchers import options

    module, spec_file = argv
    spec, run_dir = read_spec_file(spec_file)
    opts, doc = options(spec), json.loads(Path(spec_file).read_text())
    style = {"TFJob": "tf", "MPIJob": "horovod"}.get(frameworks.get(spec.framework).kubernetes_job, "torch")
    (run_dir / MARKER).write_text(str(os.getpid()))
    ray.init(address=opts.address, logging_level="warning", log_to_driver=False)
    actors, server, meet, group = [], None, None, None
    try:
        group = placement(spec, opts)
        actors = start_actors(spec, opts, group)
        facts = ray.get([a.facts.remote(2, str(run_dir / MARKER)) for a in actors])
        if style == "horovod":
            server, meet = rendezvous(spec, ray.util.get_node_ip_address())
        envs = rank_envs(spec, opts, facts, style, meet)
        gathered = opts.run_folder.value == "gathered" or (opts.run_folder.value == "auto" and not all(
            f["shared"] for f in facts))
        print(f"ray_driver: {spec.world_size} rank(s) on Ray nodes "
              f"{', '.join(sorted({f['node'][:8] for f in facts}))}; records "
              f"{'gathered by the driver' if gathered else 'written into the run folder by the nodes'}", flush=True)
        rank_argv = [opts.python or sys.executable, "-m", "harness.contract.worker", module, str(spec_file)]
        cwd = opts.workdir or os.getcwd()
        refs = [a.run.remote(rank_argv, env, cwd, doc if gathered else None) for a, env in zip(actors, envs)]
        return wait(refs, run_dir)
    finally:  # a stop (SIGTERM from the harness) ends here too: the actors, and the ranks under them, go
        for actor in actors:
            ray.kill(actor)
        if group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(group)
        if server is not None:
            server.stop()
        (run_dir / MARKER).unlink(missing_ok=True)


def _stop(signum, _frame) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    try:
        sys.exit(main(sys.argv[1:]))
    except (RuntimeError, ConnectionError) as exc:  # no cluster there, no room on it: one line for the row's reason
        print(f"ray_driver: {exc}", file=sys.stderr)
        sys.exit(1)
