"""A folder an export writes whole or not at all: its files are written into a new folder beside
it, which takes its place once every file is complete (bv.core.atomic.swap_in), so an interrupted
export leaves the old folder or the new one, never half of each."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bv.core.atomic import staging_folder, swap_in
from bv.core.errors import Fatal

T = TypeVar("T")


def replace_folder(out_dir: Path, owned: str, write: Callable[[Path], T]) -> T:
    """Run `write` on a staging folder, then swap it in as `out_dir`. `out_dir` must be missing,
    empty, or hold only `owned` (what an earlier export of this format wrote): the export replaces
    the whole folder, and refuses to drop anything else."""
    if out_dir.exists() and not out_dir.is_dir():
        raise Fatal(f"{out_dir} exists and is not a folder")
    others = sorted(p.name for p in out_dir.iterdir() if p.name != owned) if out_dir.is_dir() else []
    if others:
        raise Fatal(
            f"{out_dir} holds {', '.join(others[:5])}{' …' if len(others) > 5 else ''}, not only {owned};"
            " the export replaces the whole folder: export into an empty folder"
        )
    staged = staging_folder(out_dir)
    try:
        result = write(staged)
        swap_in(staged, out_dir)
    except OSError as exc:
        raise Fatal(f"cannot write {out_dir}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return result
