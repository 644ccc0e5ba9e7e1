"""TF_CONFIG for one TensorFlow task (a MultiWorkerMirroredStrategy worker; a parameter-server cluster's
chief, ps or worker), from the rank variables of any launcher.

TensorFlow's workers are gRPC servers, each on its own host:port, and every worker must be given
the whole list. The harness's launchers give a rank only RANK / WORLD_SIZE (torchrun, mpirun and
srun alike, mapped by harness.contract.worker) and MASTER_ADDR, so the workers exchange their addresses
through the run's folder, which every rank of a run sees (one machine, network-namespace hosts,
a cluster's shared storage): each rank picks a free port on its own address, publishes
``host:port`` and waits for all the others. Ports chosen this way cannot collide with each
other or with a port another program holds, unlike ports derived from a base number.
No TensorFlow import here.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

FOLDER = "tf-cluster"  # inside the run's folder
LOOPBACK = "127.0.0.1"
POLL_S = 0.05


def own_address(single_host: bool, env: Mapping[str, str]) -> str:
    """Where the other workers reach this one: loopback on one host, else the address of the
    interface that routes to MASTER_ADDR (the first host), which is the one the others can reach."""
    if single_host:
        return LOOPBACK
    master = env.get("MASTER_ADDR")
    if not master:
        return socket.gethostbyname(socket.gethostname())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((master, 9))  # UDP: no packet is sent, the kernel only picks the route
        return probe.getsockname()[0]


def free_port() -> int:
    """A port free on every interface (TensorFlow's gRPC server listens on all of them)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def write_atomically(path: Path, text: str) -> None:
    """Write ``path`` so that a reader never sees it half written (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    temporary.replace(path)


def await_files(paths: Sequence[Path], timeout_s: float) -> list[int]:
    """Wait until every path exists; the indices of those still missing when ``timeout_s`` ran out
    (empty: all there)."""
    deadline = time.monotonic() + timeout_s
    while missing := [i for i, p in enumerate(paths) if not p.exists()]:
        if time.monotonic() > deadline:
            return missing
        time.sleep(POLL_S)
    return []


def publish(folder: Path, rank: int, endpoint: str) -> None:
    """Write ``worker<rank>`` atomically (a reader never sees half an address)."""
    write_atomically(folder / f"worker{rank}", endpoint)


def gather(folder: Path, world: int, timeout_s: float) -> list[str]:
    """Every rank's ``host:port`` in rank order; TimeoutError naming the ranks that never published."""
    paths = [folder / f"worker{r}" for r in range(world)]
    missing = await_files(paths, timeout_s)
    if missing:
        raise TimeoutError(f"TensorFlow cluster: rank(s) {missing} of {world} published no address "
                           f"in {folder} within {timeout_s:.0f} s")
    return [p.read_text().strip() for p in paths]


def tf_config(run_dir: Path, rank: int, world: int, single_host: bool, env: Mapping[str, str],
              timeout_s: float, roles: Sequence[str] | None = None) -> dict[str, Any]:
    """This task's TF_CONFIG (as data) after meeting every other task of the run: all workers, or each
    rank in the job ``roles[rank]`` names (chief, ps, worker), numbered in rank order within its job."""
    address = own_address(single_host, env)
    folder = Path(run_dir) / FOLDER
    publish(folder, rank, f"{address}:{free_port()}")
    endpoints = gather(folder, world, timeout_s)
    roles = list(roles) if roles is not None else ["worker"] * world
    cluster: dict[str, list[str]] = {}
    for role, endpoint in zip(roles, endpoints):
        cluster.setdefault(role, []).append(endpoint)
    return {"cluster": cluster, "task": {"type": roles[rank], "index": roles[:rank].count(roles[rank])}}


def parameter_server_roles(world: int, servers: int) -> list[str]:
    """Rank 0 the chief (ParameterServerStrategy's coordinator), the next ``servers`` ranks parameter
    servers, the rest workers."""
    if world < servers + 2:
        raise ValueError(f"{servers} parameter server(s) need at least {servers + 2} processes "
                         f"(a coordinator and a worker besides), not {world}")
    return ["chief"] + ["ps"] * servers + ["worker"] * (world - 1 - servers)


def publish_report(run_dir: Path, report: Mapping[str, Any]) -> None:
    """The coordinator's account of the run (every task's records), written atomically."""
    write_atomically(Path(run_dir) / FOLDER / "report.json", json.dumps(report))


def wait_report(run_dir: Path, timeout_s: float) -> dict[str, Any]:
    """The coordinator's report, once it is there; TimeoutError after ``timeout_s``."""
    path = Path(run_dir) / FOLDER / "report.json"
    if await_files([path], timeout_s):
        raise TimeoutError(f"the coordinator wrote no report to {path} within {timeout_s:.0f} s")
    return json.loads(path.read_text())


def export(config: Mapping[str, Any]) -> None:
    os.environ["TF_CONFIG"] = json.dumps(config)
