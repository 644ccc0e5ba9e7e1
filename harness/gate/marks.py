"""A store's marks: a team's word to the gate, kept beside the results table (``gate-marks.json``).

A mark **accepts** a sweep: "from this sweep on, this is the new normal" (a deliberate change, a new
machine image). The gate then starts a new level at that sweep without testing it, in every later run as in
this one, and reports the acceptance, with its reason, where a step would have been. A mark may be narrowed
to the configurations whose config_id starts with ``config`` and to the series measured on ``host``.

The file is JSON, ``{"format": 1, "marks": [{"sweep_id", "action", "reason", "config", "host", "at"}]}``;
unknown keys or a format this version cannot read are one-line errors naming the file. ``rosetta history
--accept SWEEP --reason TEXT`` appends one (written atomically, as the table is).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from harness.base.errors import UserError
from harness.results import table as results

FILE = "gate-marks.json"
FORMAT = 1  # of the marks file; bump when a field changes meaning
ACCEPT = "accept"
ACTIONS = (ACCEPT,)


@dataclass(frozen=True)
class Mark:
    sweep_id: str
    reason: str
    action: str = ACCEPT
    config: str = ""  # a config_id prefix ("": every configuration)
    host: str = ""  # a host ("": every machine)
    at: str = ""  # UTC ISO 8601, when the mark was made

    def applies(self, config_id: str, host: str) -> bool:
        return str(config_id).startswith(self.config) and (not self.host or self.host == host)


def path_for(source: str | Path) -> Path:
    """The marks file of a store: in its results folder, or beside its .parquet file."""
    source = Path(source)
    return (source if source.is_dir() else source.parent) / FILE


def read(sources: Sequence[str | Path]) -> list[Mark]:
    """Every mark of the stores (a store without a marks file has none)."""
    marks = []
    for path in dict.fromkeys(path_for(s) for s in sources):
        if path.is_file():
            marks += _parse(path)
    return marks


def _parse(path: Path) -> list[Mark]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a marks file ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or set(doc) != {"format", "marks"}:
        raise UserError(f"{path}: a marks file of format {FORMAT} has the keys format and marks "
                        f"(found {sorted(doc) if isinstance(doc, dict) else type(doc).__name__}, "
                        f"format {doc.get('format') if isinstance(doc, dict) else None!r})")
    known = {f.name for f in fields(Mark)}
    out = []
    for k, item in enumerate(doc["marks"] if isinstance(doc["marks"], list) else [None]):
        if not isinstance(item, dict) or set(item) - known or not {"sweep_id", "reason"} <= set(item):
            raise UserError(f"{path}: marks[{k}]: an object with sweep_id and reason (and only {', '.join(sorted(known))})")
        if item.get("action", ACCEPT) not in ACTIONS or not all(isinstance(v, str) for v in item.values()):
            raise UserError(f"{path}: marks[{k}]: action must be one of {', '.join(ACTIONS)}; every value is text")
        out.append(Mark(**item))
    return out


def append(source: str | Path, mark: Mark) -> Path:
    """Add ``mark`` to the store's marks file (created if needed); return its path."""
    path = path_for(source)
    if not path.parent.is_dir():
        raise UserError(f"--accept: {path.parent} is not a results folder")
    marks = _parse(path) if path.is_file() else []
    mark = mark if mark.at else Mark(**{**asdict(mark), "at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    text = json.dumps({"format": FORMAT, "marks": [asdict(m) for m in marks + [mark]]}, indent=1) + "\n"
    results.atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    return path


def accepted(marks: Sequence[Mark], config_id: str, host: str) -> dict[str, str]:
    """sweep id -> why it was accepted, for one series."""
    return {m.sweep_id: m.reason for m in marks if m.action == ACCEPT and m.applies(config_id, host)}
