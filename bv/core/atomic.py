"""Files that are either their old version or the complete new one, never half written."""

from __future__ import annotations

import contextlib
import os
import shutil
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


# Folders: a set of files (bv data's set, bv export's run files) is written into a new folder
# beside the target, then swapped in, so the target is the old set or the new one, never a mix.
_RENAME_EXCHANGE = 2  # renameat2(2): swap two paths in one step (Linux 3.15+)
_HELD = ("SIGINT", "SIGTERM")


def staging_folder(out: Path) -> Path:
    """A new hidden folder beside `out` to write the new set into (`.NAME.partial-PID-…`), after
    cleaning what earlier runs, killed outright, left there (`clean_stale`)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(out)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-{os.getpid()}-", dir=out.parent))
    except OSError as exc:
        raise Fatal(f"cannot write beside {out}: {exc.strerror or exc}") from None


def swap_in(staged: Path, out: Path) -> None:
    """Put the complete folder `staged` in `out`'s place; the old `out` ends in `staged`'s place
    (the caller removes it). Where the system can, the two change places in one step
    (renameat2 RENAME_EXCHANGE): no moment without `out`. Elsewhere `out` moves aside to
    `.NAME.old-PID-…` and `staged` into its place with Ctrl-C and SIGTERM held back until both
    renames are done; a run killed there outright leaves `.old-…`, which the next run puts back."""
    umask = os.umask(0)
    os.umask(umask)
    staged.chmod(0o777 & ~umask)  # mkdtemp made it private
    if not out.exists():
        os.rename(staged, out)
        return
    if _exchange(staged, out):
        return
    old = staged.with_name(staged.name.replace(".partial-", ".old-"))
    with _signals_held():
        os.rename(out, old)
        try:
            os.rename(staged, out)
        except OSError:
            os.rename(old, out)
            raise
        os.rename(old, staged)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step with renameat2; False where the system cannot."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_cwd = -100
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    errno = ctypes.get_errno()
    if errno in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: not here, or not on this file system
        return False
    raise OSError(errno, os.strerror(errno), str(b))


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done, then act as they would have (handlers,
    not a signal mask: another thread of the process could take a masked signal). Only the main
    thread sets handlers; in another, the block runs as it is."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    held = [getattr(signal, name) for name in _HELD]
    saved = {signum: signal.signal(signum, lambda signum, frame: got.append(signum)) for signum in held}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        for signum in got[:1]:
            signal.raise_signal(signum)


def clean_stale(out: Path) -> None:
    """Remove what runs killed outright (SIGKILL, power loss) left beside `out`: their staging
    folders (`.NAME.partial-PID-…`) go; an old set moved aside (`.NAME.old-PID-…`) is put back
    when `out` is missing (the run died between its two renames), else it goes."""
    for path in sorted(out.parent.glob(f".{out.name}.*-*")):
        kind, _, rest = path.name[len(out.name) + 2 :].partition("-")
        pid = rest.split("-", 1)[0]
        if kind not in ("partial", "old") or not pid.isdecimal() or _alive(int(pid)):
            continue
        if kind == "old" and not out.exists():
            os.rename(path, out)
        else:
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
