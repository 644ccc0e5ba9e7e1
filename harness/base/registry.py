"""One registry mechanism for every plug-in kind: a name maps lazily to a frozen declaration.

Frameworks, launchers, storage backends, strategies and workloads each keep one ``Registry``; a name is
looked up with ``registry[name]`` (or ``registry.get(name)``), and an unknown one raises ``UnknownName``,
whose one-line message lists the valid names (fsspec's ``known_implementations``, asv's plug-ins).
A declaration is imported only when first asked for, so that listing names imports no plug-in's code.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from harness.base.errors import UserError

T = TypeVar("T")


class UnknownName(UserError, KeyError):
    """A plug-in name nobody registered: bad input (exit 2 from the CLI), and a KeyError for callers
    that catch one. The message is one line: the kind, the name, where it was given and the valid names."""

    def __init__(self, kind: str, name: object, known: list[str], where: str = "") -> None:
        place = f"{where}: " if where else ""
        super().__init__(f"{place}{kind} {name!r}: unknown; known: {', '.join(known)}")
        self.kind, self.name, self.known = kind, name, known

    def __str__(self) -> str:  # KeyError's own str() would quote the message
        return str(self.args[0])


def _load(path: str) -> Any:
    """``"package.module:ATTRIBUTE"`` (or a bare module path: the module itself)."""
    module, _, attribute = path.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


class Registry(Generic[T]):
    """Names of one plug-in kind, each mapped to a declaration: an object, a callable making it, or a
    ``"module:ATTRIBUTE"`` path imported on first use. The order of registration is the order listed."""

    def __init__(self, kind: str, entries: Mapping[str, T | str | Callable[[], T]], attribute: str = "") -> None:
        """``entries`` is kept, not copied: a name added to it later (a test's fault framework) is registered.
        ``attribute``: the declaration is this attribute of each entry's module path (``"INFO"``)."""
        self.kind = kind
        self._entries = entries
        self._attribute = attribute
        self._loaded: dict[tuple[object, int], T] = {}

    def names(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def check(self, name: object, where: str = "") -> str:
        """``name`` if registered, else ``UnknownName`` (``where``: the file, key or option it came from)."""
        if name not in self._entries:
            raise UnknownName(self.kind, name, self.names(), where)
        return name  # type: ignore[return-value]  (a str, or a str-Enum member: the same key)

    def get(self, name: object, where: str = "") -> T:
        """The declaration of ``name`` (``UnknownName`` if unknown)."""
        entry = self._entries[self.check(name, where)]
        key = (name, id(entry))  # the entry too: a name registered again with another one loads that
        if key not in self._loaded:
            self._loaded[key] = self._load(entry)
        return self._loaded[key]

    def _load(self, entry: T | str | Callable[[], T]) -> T:
        if isinstance(entry, str):
            return _load(f"{entry}:{self._attribute}" if self._attribute else entry)
        return entry() if callable(entry) else entry

    __getitem__ = get

    @classmethod
    def of_enum(cls, kind: str, enum: type, declaration: Callable[[Any], T] = lambda member: member) -> "Registry[T]":
        """A registry over a closed set's members (a str-Enum): each value maps to ``declaration(member)``."""
        return cls(kind, {member.value: (lambda m=member: declaration(m)) for member in enum})
