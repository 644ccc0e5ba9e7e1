"""Build frozen dataclasses from TOML tables, with one-line errors for every mistake.

Field types understood: ``int``, ``float``, ``str``, ``bool``, str-Enums, and
``tuple[T, ...]`` of those (a scalar is accepted as a one-element tuple).
Bounds come from field metadata: ``field(metadata={"min": 1})``.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import typing
from enum import Enum
from pathlib import Path
from typing import Any, Mapping

from harness.base.credentials import held_credential
from harness.base.errors import UserError


@dataclasses.dataclass(frozen=True)
class Where:
    """A place in a configuration file, for error messages."""

    file: str
    table: str = ""

    def key(self, key: str) -> str:
        key, table = _printable(key), _printable(self.table)  # keys are user text: one line, whatever they hold
        return f"{self.file}: [{table}] {key}" if self.table else f"{self.file}: {key}"

    def error(self, key: str, problem: str) -> UserError:
        return UserError(f"{self.key(key)}: {problem}")

    def sub(self, table: str) -> "Where":
        return Where(self.file, f"{self.table}.{table}" if self.table else table)


SHOWN_CHARS = 60  # of a user's value quoted in a message


def _printable(text: str) -> str:
    """``text`` as is when printable, else its escaped repr (a message stays one line), cut to SHOWN_CHARS."""
    text = text if text.isprintable() else repr(text)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def shown(value: Any) -> str:
    """A user's value for a message: its repr, one line, cut to SHOWN_CHARS (huge integers included)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**SHOWN_CHARS:
        return f"an integer of about 10^{len(hex(abs(value))) * 4 * 30103 // 100000}"  # no str(): huge ints refuse
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


MAX_FILE_BYTES = 16 * 1024 * 1024  # a configuration file (scenario, settings): beyond it, not written by a person
MAX_DEPTH = 32  # tables and arrays within one another: the deepest scenario nests 4; 3,000 was a RecursionError
MAX_STRING = 10_000  # characters of one string value (a field's "max_length" may say fewer)


def _depth(value: Any) -> int:
    """How deeply tables and arrays nest in ``value`` (iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:  # beyond it, the answer is known
            children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
            stack += [(child, depth + 1) for child in children]
    return deepest


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; a missing, malformed or oversized (MAX_FILE_BYTES) file is a :class:`UserError`.

    A UTF-8 byte-order mark at the start (which Windows editors write) is accepted.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise UserError(f"{path}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB; a configuration file is "
                            f"at most that")
        doc = tomllib.loads(data.decode("utf-8-sig"))
    except RecursionError:  # Python's parser recurses once a level
        raise UserError(f"{path}: not valid TOML here: tables or arrays nested deeper than {MAX_DEPTH}") from None
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not valid TOML: not UTF-8 text") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits (Python's int limit)
        raise UserError(f"{path}: not valid TOML: {str(exc).splitlines()[0][:120]}") from None
    if _depth(doc) > MAX_DEPTH:
        raise UserError(f"{path}: tables or arrays nested deeper than {MAX_DEPTH}; no configuration nests so")
    return doc


def check_keys(table: Mapping[str, Any], allowed: typing.Iterable[str], where: Where) -> None:
    """Reject unknown keys, naming the allowed ones."""
    allowed = list(allowed)
    for key in table:
        if key not in allowed:
            raise where.error(key, f"unknown key; allowed: {', '.join(allowed)}")


def expect_table(value: Any, where: Where, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise where.error(key, f"must be a table, got {type_name(value)}")
    return value


def type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def convert(value: Any, tp: Any, where: Where, key: str, meta: Mapping[str, Any] | None = None) -> Any:
    """Convert one TOML value to ``tp``, checking bounds from ``meta``."""
    meta = meta or {}
    origin = typing.get_origin(tp)
    if origin is tuple:
        (item_tp, _) = typing.get_args(tp)
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if not items and not meta.get("allow_empty"):
            raise where.error(key, "must not be empty")
        converted = tuple(convert(item, item_tp, where, key, meta) for item in items)
        if len(set(converted)) != len(converted):
            raise where.error(key, "values must not repeat")
        return converted
    if isinstance(tp, type) and issubclass(tp, Enum):
        allowed = [m.value for m in tp]
        if not isinstance(value, str) or value not in allowed:
            raise where.error(key, f"must be one of {', '.join(allowed)}; got {shown(value)}")
        return tp(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise where.error(key, f"must be true or false, got {type_name(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise where.error(key, f"must be an integer, got {type_name(value)}")
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise where.error(key, f"must be a number, got {type_name(value)}")
        try:
            value = float(value)
        except OverflowError:  # a TOML integer of hundreds of digits: beyond any float
            raise where.error(key, "must be a finite number, got an integer too large for one") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise where.error(key, "must be a finite number")
    elif tp is str:
        if not isinstance(value, str):
            raise where.error(key, f"must be a string, got {type_name(value)}")
        longest = meta.get("max_length", MAX_STRING)
        if len(value) > longest:
            raise where.error(key, f"must be at most {longest:,} characters, got {len(value):,}")
        credential = held_credential(value)
        if credential:  # the value itself is not repeated: the message reaches logs and terminals
            raise where.error(key, f"holds {credential}; configuration never carries credentials, set them "
                                   f"in the environment (the backend's library reads them from there)")
        pattern = meta.get("pattern")  # (regular expression, what it says to a user)
        if pattern is not None and not re.fullmatch(pattern[0], value, re.DOTALL):
            raise where.error(key, f"must be {pattern[1]}, got {shown(value)}")
        choices = meta.get("choices")
        if choices is not None and value not in choices:
            raise where.error(key, f"must be one of {', '.join(choices)}; got {shown(value)}")
        return value
    else:  # pragma: no cover - a programming error, not user input
        raise TypeError(f"unsupported field type {tp!r}")
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None and value < lo:
        raise where.error(key, f"must be >= {lo}, got {shown(value)}")
    if hi is not None and value > hi:
        raise where.error(key, f"must be <= {hi}, got {shown(value)}")
    return value


def build_tables(value: Any, where: Where, table: str, options_of: typing.Callable[[str], tuple[Any, type]]) -> dict:
    """A plug-in kind's ``[<table>.<name>]`` tables (strategy, launcher, storage options), each built into the
    frozen dataclass of its plug-in: ``options_of(name)`` gives the key the result is filed under (a str-Enum
    member, or the name) and the dataclass, or raises the one-line error that lists the valid names."""
    tables = expect_table(value, Where(where.file), table)
    built = {}
    for name, settings in tables.items():
        key, cls = options_of(name)
        built[key] = build(cls, expect_table(settings, where, name), where.sub(name))
    return built


def build(cls: type, table: Mapping[str, Any], where: Where, **extra_meta: Mapping[str, Any]) -> Any:
    """Build dataclass ``cls`` from ``table``: unknown keys, wrong types and bounds are errors.

    ``extra_meta`` adds metadata per field known only at run time (e.g. registry choices).
    """
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    check_keys(table, fields, where)
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, fld in fields.items():
        if name in table:
            meta = {**fld.metadata, **extra_meta.get(name, {})}
            kwargs[name] = convert(table[name], hints[name], where, name, meta)
        elif fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING:
            raise where.error(name, "missing (required)")
    return cls(**kwargs)


def field_type(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]

