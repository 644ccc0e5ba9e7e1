"""Writes that never follow a symbolic link planted in a results (or ``--out``) folder: a link named like a
chart, a dashboard page or a run folder would otherwise have the harness overwrite the file it points to (a
shell's start-up file, another user's table). Every folder below ``within`` is opened with ``O_NOFOLLOW``
from its parent's descriptor (no race between a check and the open), and so is the file itself; a link on
the way is a one-line :class:`UserError` naming it and where it points. ``within`` itself and the folders
above it are the user's choice and are followed.

Imports nothing of the harness but ``errors``."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import BinaryIO, Iterator

from harness.base.errors import UserError

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _refused(path: Path, what: str) -> UserError:
    target = f" (to {os.readlink(path)})" if os.path.islink(path) else ""
    return UserError(f"{path}: {what}{target}; not written through: remove it or choose another folder")


def _folder_fd(folder: Path, within: Path) -> int:
    """A descriptor of ``folder`` (made if missing), each of its folders below ``within`` opened without
    following a link."""
    inside = folder.relative_to(within).parts if folder.is_relative_to(within) else ()
    base = within if inside or folder == within else folder
    base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base, _DIRECTORY)
    try:
        for i, part in enumerate(inside):
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
            try:
                inner = os.open(part, _DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refused(base.joinpath(*inside[:i + 1]), "is a symbolic link or not a folder") from None
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _absolute(path: str | os.PathLike) -> Path:
    return Path(os.path.abspath(path))  # ".." taken out by the name alone, as the links are what is checked


def make_folder(folder: str | os.PathLike, within: str | os.PathLike | None = None) -> Path:
    """``folder`` made (with its parents) where no link below ``within`` is followed; returns it."""
    folder = _absolute(folder)
    os.close(_folder_fd(folder, _absolute(within) if within is not None else folder))
    return folder


@contextlib.contextmanager
def open_write(path: str | os.PathLike, within: str | os.PathLike | None = None) -> Iterator[BinaryIO]:
    """``path`` opened to write (binary, truncated, 0666 less the umask), neither it nor a folder below
    ``within`` (default: its own folder) being a link that is followed; a FIFO does not block."""
    path = _absolute(path)
    fd = _folder_fd(path.parent, _absolute(within) if within is not None else path.parent)
    try:
        try:
            out = os.open(path.name, _FILE, 0o666, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refused(path, "is a symbolic link") from None
            if exc.errno == errno.ENXIO:
                raise _refused(path, "is a FIFO with no reader") from None
            raise
    finally:
        os.close(fd)
    os.set_blocking(out, True)
    with os.fdopen(out, "wb") as fh:
        yield fh


def write(path: str | os.PathLike, data: str | bytes, within: str | os.PathLike | None = None) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` as :func:`open_write` opens it; returns the path."""
    with open_write(path, within) as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
    return Path(path)
