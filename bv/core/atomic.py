"""Files that are either their old version or the complete new one, never half written."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from bv.core.errors import Fatal


@contextlib.contextmanager
def atomic_output(path: Path, *, binary: bool = False, newline: str | None = None) -> Iterator[IO[Any]]:
    """A stream whose content replaces `path` only once all of it is written and synced: a
    temporary file in the same folder, renamed into place. On any error (a full disk, Ctrl-C)
    the temporary file goes and `path` is left as it was; an OSError becomes one clear Fatal.
    A path that exists and is not a regular file (a FIFO, a device such as /dev/null, a
    terminal) is written into, as `> path` would, and never replaced. Text (UTF-8, `newline`
    as `open` takes it) unless `binary`."""
    if _special(path):
        yield from _written_into(path, binary, newline)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)  # as an ordinary new file would be, not mkstemp's 0600
    except OSError as exc:
        raise Fatal(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        opened = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline=newline)
        with opened as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise Fatal(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def _special(path: Path) -> bool:
    """Whether `path` exists (its link followed) and is neither a regular file nor a folder."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _written_into(path: Path, binary: bool, newline: str | None) -> Iterator[IO[Any]]:
    """`path` opened for writing as it is (no temporary file, no rename, nothing created)."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        opened = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline=newline)
    except OSError as exc:
        raise Fatal(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with opened as stream:
            yield stream
    except OSError as exc:
        raise Fatal(f"cannot write {path}: {exc.strerror or exc}") from None
