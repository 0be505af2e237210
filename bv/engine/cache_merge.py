"""`bv cache merge`: replies of other reply caches (one per node, per shard) gathered into one.

A source is read through SQLite, read-only, so a copy of a cache in use (its `.sqlite` with
its `-wal` beside it) gives every reply its log holds, and a source is never changed. Every
source is someone else's file: a row that is not what bv writes (a key that is not a SHA-256,
a reply that is not a JSON object, is over the reply size limit or nested deeper than bv reads
back) is skipped and counted, the first one named; a file that is not a reply cache (its
`replies` a view, which may never end, not a table), or is corrupt, is refused with its path and
nothing of it is kept. Every source is looked at before the target is created, so a missing one
leaves no empty cache behind. A key the target already holds keeps the target's reply: the same
request, already paid.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from bv.core.errors import Fatal
from bv.core.json_values import unparsable
from bv.engine.backends.replies import MAX_REPLY_BYTES
from bv.engine.cache import ReplyCache, stored_reply

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
    first_skipped: str = ""  # why the first skipped row was, naming its reply

    def line(self) -> str:
        skipped = (
            f", {self.skipped} rows skipped (not a reply bv writes; the first: {self.first_skipped})"
            if self.skipped
            else ""
        )
        return f"{self.source}: {self.taken} replies taken, {self.already} already there{skipped}"

    def skip(self, why: str) -> None:
        self.skipped += 1
        if self.skipped == 1:
            self.first_skipped = why


def _unfit(row: tuple[object, ...]) -> str | None:
    """Why a source's row is not a reply bv writes, naming the reply by its key; None if it is."""
    key, created, backend, model, reply = row
    if not (isinstance(key, str) and KEY.fullmatch(key)):
        return "a key that is not a SHA-256"
    named = f"reply {key}"
    if not (isinstance(created, int | float) and math.isfinite(created)):
        return f"{named}: no finite date"
    if not all(isinstance(name, str) and 0 < len(name) <= MAX_NAME_CHARS for name in (backend, model)):
        return f"{named}: a backend or model name that is empty or over {MAX_NAME_CHARS} characters"
    if not isinstance(reply, str) or len(reply) > MAX_REPLY_BYTES:
        return f"{named}: not text, or over {MAX_REPLY_BYTES} bytes"
    try:  # what the cache reads back, so that a reply taken is one a rollout can use
        value = stored_reply(reply)
    except (RecursionError, ValueError) as exc:
        why = unparsable(exc) if isinstance(exc, RecursionError) else "invalid JSON"
        return f"{named}: {why}"
    return None if isinstance(value, dict) else f"{named}: not a JSON object"


def check_sources(sources: Sequence[Path]) -> None:
    """Refuse a source that is missing or not a file, before the target is created."""
    for path in sources:
        if not path.is_file():
            raise NotACache(f"{path}: no such file" if not path.exists() else f"{path}: not a regular file")


def _open_source(path: Path) -> sqlite3.Connection:
    check_sources([path])
    return sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=60)


def _plain_table(reader: sqlite3.Connection, path: Path) -> None:
    """Refuse a `replies` that is a view or a virtual table: its rows are computed, and a recursive
    view's never end. bv writes a plain table, whose rows the file's size bounds."""
    kind = reader.execute("SELECT type, sql FROM sqlite_master WHERE name = 'replies'").fetchone()
    if kind is not None and not (kind[0] == "table" and str(kind[1]).upper().startswith("CREATE TABLE")):
        raise NotACache(
            f"{path}: its `replies` is not a plain table (a view or a virtual table, whose rows may"
            " never end); it is not a bv reply cache, nothing of it was merged"
        )


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
        _plain_table(reader, source)
        db.execute("BEGIN IMMEDIATE")
        rows = reader.execute("SELECT key, created, backend, model, reply FROM replies")
        while batch := rows.fetchmany(ROWS_PER_READ):
            for row in batch:
                why = _unfit(row)
                if why is not None:
                    merged.skip(why)
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
