"""The Python environments of framework families: one per family that cannot share ``.venv`` (its pins).

A family's environment is named by its frameworks' ``FrameworkInfo.environment`` (None: the harness's own
``.venv``). Its pins are ``tools/envs/<name>.txt``; ``tools/make_env.py`` makes it once into
``~/.cache/rosetta/envs/<name>-<key>/`` (``ROSETTA_ENVS`` moves the cache), where ``key`` is a hash of the pins and
the Python version, so that a change of pins makes a new environment and never alters a made one. The
harness never imports what is in it: it starts the family's ranks with its interpreter, and finds its
modules on disk without importing them.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import sys
from pathlib import Path

from harness.base.errors import UserError

PINS_DIR = Path(__file__).resolve().parents[2] / "tools" / "envs"
MAIN = ".venv"  # the row's name for the harness's own environment
MADE = ".made"  # written last by tools/make_env.py: the environment is complete


def cache_dir() -> Path:
    """Where made environments lie (``ROSETTA_ENVS``, else ``~/.cache/rosetta/envs``)."""
    return Path(os.environ.get("ROSETTA_ENVS") or Path.home() / ".cache" / "rosetta" / "envs")


def names() -> list[str]:
    """The environments that have a pins file."""
    return sorted(p.stem for p in PINS_DIR.glob("*.txt"))


def pins_file(name: str) -> Path:
    path = PINS_DIR / f"{name}.txt"
    if not path.is_file():
        raise UserError(f"environment {name!r}: no pins file {path} (known: {', '.join(names()) or 'none'})")
    return path


def parse_pins(text: str, where: str = "pins") -> tuple[str, ...]:
    """The requirement lines of a pins file, comments and blanks dropped; each must pin one version (``==``)."""
    pins = tuple(line.split("#", 1)[0].strip() for line in text.splitlines())
    pins = tuple(p for p in pins if p)
    loose = [p for p in pins if p.count("==") != 1]
    if loose:
        raise UserError(f"{where}: {loose[0]!r}: every line pins one version (name==version)")
    return pins


def pins(name: str) -> tuple[str, ...]:
    path = pins_file(name)
    return parse_pins(path.read_text(), str(path))


def key(pinned: tuple[str, ...], python: tuple[int, int] = sys.version_info[:2]) -> str:
    """16 hex digits of the sorted, lower-cased pins and the Python version (a venv is bound to its Python)."""
    text = "\n".join([f"python=={python[0]}.{python[1]}", *sorted(p.lower().replace(" ", "") for p in pinned)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def location(name: str) -> Path:
    """The folder environment ``name`` is (or will be) made in."""
    return cache_dir() / f"{name}-{key(pins(name))}"


def interpreter(name: str) -> Path:
    return location(name) / "bin" / "python"


def is_made(name: str) -> bool:
    return (location(name) / MADE).is_file()


def worker_python(environment: str | None, default: str = sys.executable) -> str:
    """The interpreter a family's ranks start with: its environment's, or ``default`` (the harness's)."""
    return default if environment is None else str(interpreter(environment))


def missing_modules(environment: str, modules: tuple[str, ...] | list[str]) -> list[str]:
    """The top-level ``modules`` not found in the environment's site-packages (looked up on disk, nothing
    imported); every one of them where the environment is not made."""
    if not is_made(environment):
        return list(modules)
    site = [str(p) for p in location(environment).glob("lib/python*/site-packages")]
    return [m for m in modules if importlib.machinery.PathFinder.find_spec(m.split(".")[0], site) is None]


def not_made_reason(environment: str) -> str | None:
    """Why a run in ``environment`` cannot start here (it is not made), or None."""
    if is_made(environment):
        return None
    return (f"its environment {environment!r} is not made (make envs, or .venv/bin/python tools/make_env.py "
            f"{environment}: {location(environment)})")


def lock(environment: str | None) -> str:
    """What the row records of the environment: ``<key> name==version ...`` (its pins), or for ``.venv``
    the key of pyproject.toml's text (its pins live there)."""
    if environment is None:
        pyproject = PINS_DIR.parents[1] / "pyproject.toml"
        text = pyproject.read_text() if pyproject.is_file() else ""
        return f"{hashlib.sha256(text.encode()).hexdigest()[:16]} pyproject.toml"
    pinned = pins(environment)
    return " ".join([key(pinned), *pinned])


def row_fields(environment: str | None) -> dict[str, str]:
    """The row's environment section: the environment's name and its lock."""
    return {"environment": environment or MAIN, "environment_lock": lock(environment)}
