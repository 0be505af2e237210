"""Run folders are owned: a folder holds one kind of run (bv eval's config.json, bv optimize's
run.json) and has one writer at a time.

`-o DIR` onto a folder that is not empty and holds no run of that kind is refused (it may be
the user's own files, or another kind of run), as is a path that is not a folder (a file, a
symbolic link to nothing). While a run writes, it holds an exclusive `flock` on DIR/.bv.lock:
a second writer into the same folder is refused at once, and a killed run leaves no lock held
(the kernel drops it with the process)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from bv.core.errors import BadConfig, Fatal

LOCK = ".bv.lock"
MARKERS = {"eval": "config.json", "optimize": "run.json"}  # the file that says a folder's kind


class FolderRefused(BadConfig):
    """A run folder this run may not write into (someone else's, another kind, in use)."""


def _kind_of(names: set[str]) -> str | None:
    return next((kind for kind, marker in MARKERS.items() if marker in names), None)


def check(path: Path, kind: str) -> None:
    """Refuse `path` as the folder of a `kind` run (bv eval, bv optimize) unless it is new, empty
    or holds a run of that kind (FolderRefused; nothing is written)."""
    if path.is_symlink() and not path.exists():
        raise FolderRefused(
            f"{path} is a symbolic link to {os.readlink(path)}, which does not exist: make that"
            " folder, or give another `out`"
        )
    if path.exists() and not path.is_dir():
        raise FolderRefused(f"{path} is not a folder: give another `out`")
    if not path.exists():
        return
    try:
        names = {entry.name for entry in os.scandir(path)} - {LOCK}
    except OSError as exc:
        raise Fatal(f"cannot read the folder {path}: {exc.strerror or exc}") from None
    if not names or MARKERS[kind] in names:
        return
    other = _kind_of(names)
    held = f"a bv {other} run" if other else f"files that are not a bv {kind} run ({MARKERS[kind]} absent)"
    raise FolderRefused(
        f"{path} holds {held}; bv {kind} writes only into a new or empty folder or one of its own"
        " runs: give another `out`"
    )


def running(path: Path) -> bool:
    """Whether a bv run holds `path`'s lock now (its writer is alive): a shared lock is tried
    and let go at once; a folder with no lock file, or one that cannot be opened, is not running."""
    try:
        fd = os.open(path / LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops the shared lock, if it was taken
    return False


@contextlib.contextmanager
def owned(path: Path, kind: str) -> Iterator[None]:
    """The folder checked (`check`), made, and held for this run alone until the block ends."""
    check(path, kind)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise Fatal(f"cannot make the run folder {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderRefused(
                f"{path}: another bv {kind} is writing into this folder now; wait for it to end,"
                " or give another `out`"
            ) from None
        check(path, kind)  # again, now that no other writer can be between the check and the run
        yield
    finally:
        os.close(fd)
