"""The set-up's installer: ``pip install`` arguments, carried out by uv where it can, else by pip.

    python tools/install_packages.py [pip install arguments...]

installs into the environment of the interpreter that runs it, with the uv beside it (else the
first on PATH). uv installs from its cache by linking files and compiles the bytecode on every
core: the set-up's packages take it 24 s with its cache warm (30 s cold), against pip's 70 s, on a
2-core machine (measured one after the other, same packages). uv does not read pip's configuration, which is where many machines
name their package index (a mirror, an index on disk, a certificate), so pip's effective settings
are handed to uv as uv's own environment variables, and the candidates of every index are weighed
together as pip does (``unsafe-best-match``), so that both resolve the same versions. Where pip is
configured with something uv has no equivalent for, where uv is not installed, or where uv fails,
pip installs instead, and a line says why. Standard library only: it runs before anything else is
installed.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

# pip's setting -> (uv's variable, how pip's whitespace-separated value is written for it)
TRANSLATED = {
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
    "constraint": ("UV_CONSTRAINT", " "),
    "trusted-host": ("UV_INSECURE_HOST", " "),
    "cert": ("SSL_CERT_FILE", " "),
    "timeout": ("UV_HTTP_TIMEOUT", " "),
    "default-timeout": ("UV_HTTP_TIMEOUT", " "),
    "proxy": ("ALL_PROXY", " "),
}
# pip's settings that change nothing about which files are installed
IGNORED = {"disable-pip-version-check", "no-warn-script-location", "root-user-action", "progress-bar",
           "quiet", "verbose", "no-input", "no-color", "require-virtualenv", "break-system-packages",
           "cache-dir", "no-cache-dir", "no-python-version-warning", "config-file"}
# where pip reads an install's settings, weakest first: the config files' sections, then PIP_* variables
SECTIONS = ("global", "install", ":env:")


def pip_settings(config_list: str) -> dict[str, str]:
    """pip's effective install settings from ``pip config list`` output (``section.key='value'`` lines)."""
    found: dict[str, dict[str, str]] = {}
    for line in config_list.splitlines():
        name, sep, value = line.partition("=")
        section, dot, key = name.rpartition(".")
        if sep and dot and section in SECTIONS:
            found.setdefault(section, {})[key] = str(ast.literal_eval(value))
    return {k: v for section in SECTIONS for k, v in found.get(section, {}).items()}


def read_pip_settings() -> dict[str, str]:
    """This machine's effective pip install settings, files and ``PIP_*`` variables, as this pip reads them."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True)
    return pip_settings(listed.stdout)


def uv_environment(settings: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """uv's variables for pip's settings, and the first setting uv cannot take (None: all translated).

    A uv variable the user set already is kept: it is their word on uv.
    """
    env = {"UV_INDEX_STRATEGY": "unsafe-best-match", "UV_SYSTEM_CERTS": "1"}  # pip's resolution; the system's CAs
    for key, value in settings.items():
        if key in IGNORED:
            continue
        if key == "no-index":
            env["UV_NO_INDEX"] = "1" if value.lower() in ("1", "true", "yes", "on") else "0"
        elif key in TRANSLATED:
            variable, separator = TRANSLATED[key]
            env[variable] = separator.join(value.split())
        else:
            return {}, key
    return {k: v for k, v in env.items() if k not in os.environ}, None


def install(args: list[str]) -> int:
    """Install ``args`` (pip install's arguments) into this interpreter's environment; the exit status."""
    pip = [sys.executable, "-m", "pip", "install", *args]
    uv = shutil.which("uv", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if uv is None:
        return _pip(pip, "uv is not installed")
    env, untranslated = uv_environment(read_pip_settings())
    if untranslated is not None:
        return _pip(pip, f"pip's setting {untranslated!r} has no uv equivalent")
    done = subprocess.run([uv, "pip", "install", "--python", sys.executable, "--compile-bytecode", *args],
                          env={**os.environ, **env})
    if done.returncode != 0:
        return _pip(pip, f"uv failed (exit {done.returncode})")
    return 0


def _pip(command: list[str], why: str) -> int:
    print(f"install_packages: installing with pip: {why}", file=sys.stderr)
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(install(sys.argv[1:]))
