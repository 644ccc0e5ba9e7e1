"""Keep secrets out of everything the harness writes: rows, logs, spec files, command records, batch
scripts, manifests, messages, in dry runs and real runs alike.

Two nets: credentials inside strings (a password in a URL, a signature in a query string, a key in a
connection string: ``harness.base.credentials``), masked wherever they appear; and the values of
secret-looking environment variables (storage keys, SAS tokens, passwords, which the workers inherit and
may print; by the variable's name, or by the value's own look whatever the name), masked in free text only,
in their encoded forms too (base64, URL-encoded, hex: a library printing an Authorization header or a URL). A row's dimensions (framework, workload, ...) and ids are never
masked by value: a secret that equals one of them is published by the row anyway, and masking it would
only destroy the data (``HF_TOKEN=resnet50`` must not turn a row's workload into ``***``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets as random_bytes
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.base import credentials

MASK = "***"
MIN_SECRET_CHARS = 6  # shorter values would mask ordinary words
SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSW|CREDENTIAL|SAS|CONNECTION_STRING|AUTH", re.IGNORECASE)
# Files never scrubbed: what the harness writes as binary (tables, charts) and what frameworks save (weights).
# Every other file of a run's folder is scrubbed unless its first bytes hold a NUL (binary): logs of any
# launcher's naming (SLURM's slurm-<job>.out, a runtime's .err), records, scripts, manifests.
BINARY_SUFFIXES = (".parquet", ".png", ".pdf", ".svg", ".pt", ".pth", ".ckpt", ".npz", ".npy", ".h5", ".keras",
                   ".pkl", ".bin", ".safetensors", ".tar", ".gz", ".zip", ".jpg", ".jpeg")
SNIFF_BYTES = 8192
# Row fields that are dimensions and ids the harness wrote: never masked by value (patterns still apply).
# (``spec`` is not one: it carries the scenario's option values, which are masked like free text.)
STRUCTURED_FIELDS = frozenset({"sweep_id", "run_id", "config_id", "scenario", "framework", "workload", "size",
                               "strategy", "storage", "launcher", "network", "precision", "memory_format",
                               "compile", "layout", "device_requested", "device", "status", "sample_unit",
                               "run_dir", "timestamp", "schema_version",
                               "backend", "collective", "dtype"})  # the comm table's dimensions


def secret_values(env: Mapping[str, str] | None = None, public: Iterable[str] = ()) -> list[str]:
    """What to mask by value: the values of the environment variables whose names say they hold a secret,
    and of any variable whose value looks like one (:func:`harness.base.credentials.looks_like_token`: a
    known token shape, or random-looking), each also as a worker may print it encoded (:func:`encoded_forms`:
    base64, URL-encoded, hex); less ``public`` values (a run's dimension values: already in the row in clear)."""
    env = os.environ if env is None else env
    public = set(public)
    whole = {v for k, v in env.items() if SECRET_NAME.search(k) or credentials.looks_like_token(v)}
    # and the credentials inside them (a connection string's AccountKey, a URL's password), which a worker
    # may print alone
    parts = {part for v in whole for part in credentials.secrets_in(v)}
    values = {v for v in whole | parts if len(v) >= MIN_SECRET_CHARS and v not in public}
    values |= {form for v in values for form in encoded_forms(v)} - public
    return sorted(values, key=len, reverse=True)  # longest first: a secret holding another is masked whole


def encoded_forms(value: str) -> set[str]:
    """``value`` as a worker or a library may print it encoded: percent-encoded (upper and lower case hex,
    ``+`` for spaces too), hex of its UTF-8 (both cases), and base64 (standard and URL-safe) at each of the
    three places it can start within a longer encoded text (a ``user:password`` pair, a JSON blob): only the
    characters its own bytes decide, none its neighbours' (so a secret inside any base64 text is found)."""
    raw = value.encode("utf-8", "surrogateescape")
    forms = {urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value, safe=""), raw.hex(), raw.hex().upper()}
    forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), urllib.parse.quote(value, safe="")))
    for lead in range(3):
        text = base64.b64encode(bytes(lead) + raw + bytes(2)).decode()
        first, stop = -(-8 * lead // 6), (8 * (lead + len(raw))) // 6  # characters wholly of the value's bits
        core = text[first:stop]
        forms |= {core, core.replace("+", "-").replace("/", "_")}
    return {f for f in forms if f != value and len(f) >= MIN_SECRET_CHARS}


def public_values(row_or_dims: Mapping[str, Any]) -> set[str]:
    """The string values of a row's structured fields (see STRUCTURED_FIELDS)."""
    return {str(v) for k, v in row_or_dims.items() if k in STRUCTURED_FIELDS and v is not None}


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every known secret value and every credential pattern masked."""
    for value in secret_values() if secrets is None else secrets:
        text = text.replace(value, MASK)
    return credentials.mask(text, MASK)


def scrub_row(row: dict[str, Any]) -> dict[str, Any]:
    """A result row with credentials masked in every string field, and secret values in its free text."""
    secrets = secret_values(public=public_values(row))
    return {k: (scrub(v, [] if k in STRUCTURED_FIELDS else secrets) if isinstance(v, str) else v)
            for k, v in row.items()}


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """An environment to record: secret-named variables masked, the others scrubbed."""
    return {k: MASK if SECRET_NAME.search(k) or credentials.looks_like_token(v) else scrub(v) for k, v in env.items()}


RECORD = ".secrets.json"  # a run's folder: its secrets' salted hashes, private, while the run has no row


def record_secrets(run_dir: Path, public: Iterable[str] = ()) -> Path:
    """Keep, before a run is launched, what the scrub needs to find its secrets should the harness be killed
    and the run scrubbed later from a shell without them: each secret value's length and salted SHA-256
    (never the value), in a file only its owner reads (0600, made with O_EXCL and O_NOFOLLOW)."""
    salt = random_bytes.token_hex(16)
    digests = sorted({(len(v), _digest(salt, v)) for v in secret_values(public=public)})
    path = Path(run_dir) / RECORD
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"salt": salt, "secrets": digests}, out)
    return path


def recorded_secrets(run_dir: Path) -> tuple[str, set[tuple[int, str]]] | None:
    """The salt and (length, digest) pairs :func:`record_secrets` kept in ``run_dir``, or None (none kept:
    a run from before, or a damaged record, which the caller treats as unknown secrets)."""
    path = Path(run_dir) / RECORD
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd) as fh:
            data = json.load(fh)
        return str(data["salt"]), {(int(n), str(d)) for n, d in data["secrets"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _digest(salt: str, value: str) -> str:
    return hashlib.sha256(f"{salt}\0{value}".encode("utf-8", "surrogateescape")).hexdigest()


def mask_recorded(text: str, record: tuple[str, set[tuple[int, str]]]) -> str:
    """``text`` with every substring whose salted hash is a recorded secret's masked: each window of each
    recorded length hashed (a log of 1 MB: about a second a length)."""
    salt, digests = record
    spans = []
    for length in sorted({n for n, _ in digests}, reverse=True):  # longest first, as secret_values orders them
        wanted = {d for n, d in digests if n == length}
        prefix = hashlib.sha256(f"{salt}\0".encode())
        for i in range(len(text) - length + 1):
            window = prefix.copy()
            window.update(text[i:i + length].encode("utf-8", "surrogateescape"))
            if window.hexdigest() in wanted:
                spans.append((i, i + length))
    if not spans:
        return text
    masked, end = [], 0
    for start, stop in sorted(spans):
        if start >= end:
            masked.append(text[end:start] + MASK)
            end = stop
        elif stop > end:  # overlapping a span already masked: its tail masked with it
            end = stop
    return "".join(masked) + text[end:]


def scrub_folder(folder: Path, public: Iterable[str] = (),
                 record: tuple[str, set[tuple[int, str]]] | None = None) -> list[Path]:
    """Rewrite, in place and atomically, every text file under a run's folder that holds a secret; returns
    them. Symbolic links are not followed (nothing outside the folder is written).

    ``public``: values not to mask by value (the run's dimension values, see :func:`public_values`);
    ``record``: the secrets a killed run recorded at launch (:func:`recorded_secrets`), masked too.
    """
    secrets = secret_values(public=public)
    rewritten = []
    for root, dirs, files in os.walk(folder):  # os.walk does not descend into linked folders
        for name in files:
            path = Path(root) / name
            if path.is_symlink() or not path.is_file() or path.suffix.lower() in BINARY_SUFFIXES:
                continue
            with open(path, "rb") as fh:
                if b"\0" in fh.read(SNIFF_BYTES):
                    continue
            text = path.read_text(errors="surrogateescape")
            clean = scrub(text, secrets)
            clean = mask_recorded(clean, record) if record and record[1] else clean
            if clean != text:
                # a fresh name made with O_EXCL: a link planted at a fixed one would be written through
                fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{name}.", suffix=".scrub")
                with os.fdopen(fd, "w", errors="surrogateescape") as out:
                    out.write(clean)
                os.chmod(tmp, path.stat().st_mode & 0o777)  # the file keeps its mode
                os.replace(tmp, path)
                rewritten.append(path)
    return rewritten
