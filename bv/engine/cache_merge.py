"""`bv cache merge`: replies of other reply caches (one per node, per shard) gathered into one.

A source is read through SQLite, read-only, so a copy of a cache in use (its `.sqlite` with
its `-wal` beside it) gives every reply its log holds, and a source is never changed. Every
source is someone else's file: a row that is not what bv writes (a key that is not a SHA-256,
a reply that is not a JSON object or is over the reply size limit) is skipped and counted; a
file that is not a reply cache, or is corrupt, is refused with its path and nothing of it is
kept. A key the target already holds keeps the target's reply: the same request, already paid.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from bv.core.errors import Fatal
from bv.engine.backends.replies import MAX_REPLY_BYTES
from bv.engine.cache import ReplyCache

KEY = re.compile(r"[0-9a-f]{64}")
MAX_NAME_CHARS = 1000  # a backend's or model's name
ROWS_PER_READ = 500
INSERT = "INSERT OR IGNORE INTO replies (key, created, backend, model, reply) VALUES (?, ?, ?, ?, ?)"


class NotACache(Fatal):
    """A source that cannot be read as a reply cache: said with its path, nothing of it merged."""


@dataclass
class Merged:
    """What one source gave: replies taken, keys the target already held, rows skipped."""

    source: Path
    taken: int = 0
    already: int = 0
    skipped: int = 0

    def line(self) -> str:
        skipped = f", {self.skipped} rows skipped (not a reply bv writes)" if self.skipped else ""
        return f"{self.source}: {self.taken} replies taken, {self.already} already there{skipped}"


def _valid(row: tuple[object, ...]) -> bool:
    key, created, backend, model, reply = row
    if not (isinstance(key, str) and KEY.fullmatch(key)):
        return False
    if not (isinstance(created, int | float) and math.isfinite(created)):
        return False
    if not all(isinstance(name, str) and 0 < len(name) <= MAX_NAME_CHARS for name in (backend, model)):
        return False
    if not isinstance(reply, str) or len(reply) > MAX_REPLY_BYTES:
        return False
    try:
        return isinstance(json.loads(reply), dict)
    except ValueError:
        return False


def _open_source(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise NotACache(f"{path}: no such file" if not path.exists() else f"{path}: not a regular file")
    return sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=60)


def merge_into(target: ReplyCache, source: Path) -> Merged:
    """Copy `source`'s replies into `target` in one transaction: all of them or, on a bad file, none."""
    if target.path.exists() and source.exists() and source.resolve() == target.path.resolve():
        raise NotACache(f"{source} is the cache being merged into")
    merged = Merged(source)
    db = target.db
    try:
        reader = _open_source(source)
    except sqlite3.Error as exc:
        raise NotACache(f"{source} cannot be opened as a reply cache ({exc})") from None
    try:
        db.execute("BEGIN IMMEDIATE")
        rows = reader.execute("SELECT key, created, backend, model, reply FROM replies")
        while batch := rows.fetchmany(ROWS_PER_READ):
            for row in batch:
                if not _valid(row):
                    merged.skipped += 1
                    continue
                added = db.execute(INSERT, row).rowcount
                merged.taken += added
                merged.already += 1 - added
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise NotACache(
            f"{source} could not be merged into {target.path} ({exc}): it is not a readable bv reply"
            f" cache, or {target.path} cannot be written; nothing of it was merged"
        ) from None
    finally:
        reader.close()
    return merged
