"""``python -m harness.launchers.horovodrun.entry [--remote-agent AGENT] HOROVODRUN_ARGS...``: horovodrun,
its build check remembered, its remote shell replaceable.

Before it starts a rank, horovodrun asks whether this Horovod was built with Gloo (``--gloo``) or MPI
(``--mpi``): ``horovod.common.util.gloo_built``/``mpi_built`` fork a process that imports a framework
extension, TensorFlow's first, only to read two flags. That costs 3.7 s of every launch on a 2-core
machine (36 of the quickstart's launches are Horovod's or TensorFlow's), for a PyTorch run too. The
answer depends only on the installed Horovod, so it is asked once per installation and kept in
``~/.cache/rosetta/horovod-built-<key>.json`` (``key``: the environment's prefix, Horovod's version and
its extensions' sizes and modification times, so a rebuilt Horovod is asked again). Everything else is
horovodrun's own ``run_commandline``: the ranks start exactly as ``horovodrun`` starts them.

``--remote-agent AGENT``: hosts are reached by ``AGENT HOST COMMAND`` instead of ssh (Horovod's
``SSH_COMMAND_PREFIX``, which its ssh check and its Gloo launch both read): network-namespace hosts,
through ``tools/netns_rsh.sh``, as Open MPI's daemons are.

Horovod is imported inside :func:`main` only: the harness imports no framework at module level.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Callable


def installation_key(package_dir: Path, version: str) -> str:
    """Hex digest of what decides Horovod's build flags: its prefix, version and extension files."""
    parts = [sys.prefix, version]
    for ext in sorted(package_dir.glob("*/mpi_lib*.so")):
        stat = ext.stat()
        parts.append(f"{ext.relative_to(package_dir)}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def cache_file(key: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rosetta" / f"horovod-built-{key}.json"


def remembered(path: Path, checks: dict[str, Callable[..., bool]]) -> dict[str, bool]:
    """The build flags from ``path``, or asked of Horovod (its own slow checks) and written there."""
    try:
        flags = json.loads(path.read_text())
        if set(flags) == set(checks) and all(isinstance(v, bool) for v in flags.values()):
            return flags
    except (OSError, ValueError):
        pass  # not asked yet on this installation, or a damaged file: ask again
    flags = {name: bool(check()) for name, check in checks.items()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(flags))
        tmp.replace(path)  # atomic: ranks of concurrent launches never read half a file
    except OSError:
        pass  # a read-only home: the next launch asks again, correct but slower
    return flags


def main() -> None:
    import horovod
    from horovod.runner import launch
    from horovod.runner.util import remote

    if sys.argv[1:2] == ["--remote-agent"]:
        remote.SSH_COMMAND_PREFIX = sys.argv[2]
        del sys.argv[1:3]

    key = installation_key(Path(horovod.__file__).parent, horovod.__version__)
    flags = remembered(cache_file(key), {"gloo": launch.gloo_built, "mpi": launch.mpi_built})
    # launch.py calls the names it imported from horovod.common.util: answer them there
    launch.gloo_built = lambda verbose=False: flags["gloo"]
    launch.mpi_built = lambda verbose=False: flags["mpi"]
    sys.argv[0] = "horovodrun"
    launch.run_commandline()


if __name__ == "__main__":
    main()
