"""Make the framework families' Python environments (harness/base/python_envs.py), each once.

    .venv/bin/python tools/make_env.py [NAME ...]      (no NAME: every tools/envs/<name>.txt)

An environment is made into ``~/.cache/rosetta/envs/<name>-<key>/`` (key: a hash of its pins and the Python
version) with uv, given pip's settings as tools/install_packages.py gives them (the same index, mirrors,
certificate); with pip where uv is absent or fails. It is marked made
last, so that a cut-short make leaves nothing that looks made; a made one is not touched
(the second call returns at once). Run by ``make envs``, which quickstart and test depend on.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: harness.base

import install_packages  # noqa: E402 - tools/, beside this file (sys.path[0])

from harness.base import python_envs  # noqa: E402
from harness.base.errors import UserError  # noqa: E402


def _uv() -> str | None:
    return shutil.which("uv", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def _install(target: Path, pins: tuple[str, ...]) -> None:
    """A venv at ``target`` on this Python, with ``pins`` installed (uv, else pip)."""
    uv = _uv()
    env, untranslated = install_packages.uv_environment(install_packages.read_pip_settings())
    if uv is not None and untranslated is None:
        made = subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(target)],
                              env={**os.environ, **env})
        if made.returncode == 0 and subprocess.run(
                [uv, "pip", "install", "--quiet", "--python", str(target / "bin" / "python"), "--compile-bytecode",
                 *pins], env={**os.environ, **env}).returncode == 0:
            return
        print("make_env: uv failed: pip installs instead", file=sys.stderr)
        shutil.rmtree(target, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", *pins], check=True)


def make(name: str) -> Path:
    """Environment ``name`` made (or found made); its folder. One make at a time per environment (a lock)."""
    place = python_envs.location(name)
    if python_envs.is_made(name):
        return place
    place.parent.mkdir(parents=True, exist_ok=True)
    with open(place.with_name(f"{place.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second make waits, then finds it made
        if python_envs.is_made(name):
            return place
        started = time.monotonic()
        # made in place (a venv names its own folder in its scripts); an unmarked one is a make cut short
        shutil.rmtree(place, ignore_errors=True)
        _install(place, python_envs.pins(name))
        (place / python_envs.MADE).write_text("\n".join(python_envs.pins(name)) + "\n")
    print(f"make_env: {name} made in {time.monotonic() - started:.0f} s: {place}", file=sys.stderr)
    return place


def main(argv: list[str]) -> int:
    for name in argv or python_envs.names():
        try:
            place = make(name)
        except (UserError, subprocess.CalledProcessError) as exc:
            print(f"make_env: {name}: {exc}", file=sys.stderr)
            return 1
        print(f"make_env: {name}: {place}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
