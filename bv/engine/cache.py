"""The reply cache: every finished model reply, keyed by everything that determines it.

A SQLite database in WAL mode, so several bv processes (shards, the judge) can share one
file; each stage closes it when it ends (`close`: the log folded into the file), so once bv is
done the `.sqlite` alone holds every reply. Re-running an interrupted command finds its
finished replies here and sends only the rest. Errors are never stored, and neither is any
API key: the key hashes the backend, model, the endpoint's scope (None for an OpenAI-compatible
model under the default `cache_scope` model: its replicas and a proxy answer alike; its URLs
under `cache_scope` endpoint; Azure's resource; an agent's command template), messages (images
by content hash), parameters, run and turn. Each reply is stored with the endpoint that made
it, which rows answered from the cache record.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import orjson

from bv.core import environment
from bv.core.errors import Fatal
from bv.core.images import content_hash, map_image_urls
from bv.core.run_context import worded
from bv.core.terminal import printable

CACHE_VERSION = 1
# How long closing waits for other processes' readers and writers before leaving the checkpoint to them.
CLOSE_WAIT_MS = 5000


def default_path() -> Path:
    return environment.cache_home() / "bv" / "cache.sqlite"


class ImageHashes:
    """Content hashes of image files, remembered for the whole process by (path, size, mtime, ctime,
    inode, device), so each file is read once however many stages and gates hash it (each gate of a
    `bv optimize` run has its own caller); a file changed or replaced is read again."""

    _known: ClassVar[dict[tuple[str, int, int, int, int, int], str]] = {}  # shared by every instance

    def __call__(self, path: Path) -> str:
        try:
            stat = os.stat(path)
        except (OSError, ValueError):
            return content_hash(path)  # raises ImageError, saying why
        key = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev)
        known = self._known
        digest = known.get(key)
        if digest is None:
            if len(known) > 10_000:
                known.clear()
            digest = known[key] = content_hash(path)
        return digest


class RequestKey:
    """The cache keys of one prompt's requests: everything but the run and the turn serialised
    (its images hashed) once, so each run's key is one SHA-256 over the very bytes `request_key`
    hashes (a replay derives a prompt's `repeats` keys from one of these)."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        names = sorted([*fields, "run", "turn"])  # json.dumps(sort_keys=True)'s order
        parts, text = [], "{"
        for i, name in enumerate(names):
            text += ("," if i else "") + _dumps(name) + ":"
            if name in ("run", "turn"):
                parts.append(text)
                text = ""
            else:
                text += _dumps(fields[name])
        self._head = hashlib.sha256(parts[0].encode())
        self._between, self._tail = parts[1], text + "}"

    def __call__(self, run: int, turn: int) -> str:
        digest = self._head.copy()
        digest.update(f"{run}{self._between}{turn}{self._tail}".encode())
        return digest.hexdigest()


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def prompt_key(
    *,
    backend: str,
    model: str,
    endpoint: str | None,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    image_hash: ImageHashes,
) -> RequestKey:
    """The keys of one prompt's requests by run and turn: what they hash is the JSON (keys sorted)
    of the cache version, backend, model, endpoint, messages (images by content hash), parameters,
    run and turn, so the same inputs give the same key on any machine."""
    return RequestKey(
        {
            "v": CACHE_VERSION,
            "backend": backend,
            "model": model,
            "endpoint": endpoint,
            "messages": map_image_urls(messages, lambda path: "sha256:" + image_hash(path)),
            "params": params,
        }
    )


def request_key(
    *,
    backend: str,
    model: str,
    endpoint: str | None,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    run: int,
    turn: int,
    image_hash: ImageHashes,
) -> str:
    """The cache key of one request (`prompt_key`'s, for one run and turn)."""
    keys = prompt_key(
        backend=backend,
        model=model,
        endpoint=endpoint,
        messages=messages,
        params=params,
        image_hash=image_hash,
    )
    return keys(run, turn)


def fix_hint(path: Path, opening: bool = False) -> str:
    """How to get past a cache that failed: what the messages about it end with."""
    first = "" if opening else f"free disk space or make {path} writable, or empty it (`bv cache clear`), or "
    return f"{first}delete {path}, or run with `no_cache` or another `cache` FILE"


LOOKUPS_PER_QUERY = 500  # keys in one `SELECT ... IN` (SQLite takes at least 999 parameters)


def stored_reply(text: str) -> Any:
    """A stored reply's JSON value: json's very value, parsed by orjson (3x faster) unless it
    refuses the text (NaN, a lone surrogate) or reads an integer beyond ±2^63 as a float."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
    return value if _no_huge_float(value) else json.loads(text)


def _no_huge_float(value: Any) -> bool:
    """Whether no float in `value` is at or beyond ±2^63 (where orjson's reading of an integer of
    19 digits or more differs from json's; a float that large in the text is read again too)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = item.__class__
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and not -(2.0**63) < item < 2.0**63:
            return False
    return True


class CacheUnusable(Fatal):
    """The cache file cannot be opened (corrupt, not a database, unwritable folder): said with
    its path and the fix, before any request is sent."""


def _date(epoch: float) -> str:
    """A time stamp people read: ISO 8601, UTC, to the second."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ReplyCache:
    """get/put of finished replies; each put is its own transaction, durable once it returns.

    The cache serves the run, never the other way round: once it fails mid-run (a full disk,
    a file made read-only, corruption found), bv says so once, naming the file and the fix, and
    goes on without it, so every paid reply still reaches the output exactly once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.failed: str | None = None  # why the cache was given up, once it was
        self.closed = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS replies ("
                " key TEXT PRIMARY KEY, created REAL NOT NULL, backend TEXT NOT NULL,"
                " model TEXT NOT NULL, reply TEXT NOT NULL)"
            )
            self.db.execute("SELECT key, created, backend, model, reply FROM replies LIMIT 1").fetchall()
        except (sqlite3.Error, OSError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CacheUnusable(
                f"the reply cache {path} cannot be used ({why}); {fix_hint(path, opening=True)}"
            ) from None

    def __enter__(self) -> ReplyCache:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Fold the write-ahead log into the file, then close: afterwards copying the `.sqlite`
        copies every reply. Another bv process still using the file keeps the log until it closes
        too; the checkpoint waits for it at most CLOSE_WAIT_MS and is then left to that process."""
        if self.closed:
            return
        self.closed = True
        try:
            self.db.execute(f"PRAGMA busy_timeout={CLOSE_WAIT_MS}")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error:
            pass  # busy, or the cache already failed: the last process to close checkpoints
        finally:
            self.db.close()

    def _give_up(self, exc: Exception) -> None:
        """Say once which file failed and how to fix it; the run goes on without the cache."""
        if self.failed is None:
            self.failed = str(exc)
            sys.stderr.write(
                printable(
                    worded(
                        f"bv: warning: the reply cache {self.path} failed ({exc}); going on without it:"
                        f" every reply is still written to the output, but not cached for a re-run. To fix:"
                        f" {fix_hint(self.path)}"
                    )
                )
                + "\n"
            )

    def get(self, key: str) -> dict[str, Any] | None:
        if self.failed is not None:
            return None
        try:
            row = self.db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
            return stored_reply(row[0]) if row else None
        except (sqlite3.Error, ValueError) as exc:  # corruption found, or a reply that is not JSON
            self._give_up(exc)
            return None

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The stored replies of many keys, by key (a missing key is absent): one query a few
        hundred keys, where one `get` each cost twice as much (a replay's lookups)."""
        found: dict[str, Any] = {}
        if self.failed is not None:
            return found
        try:
            for start in range(0, len(keys), LOOKUPS_PER_QUERY):
                part = keys[start : start + LOOKUPS_PER_QUERY]
                sql = f"SELECT key, reply FROM replies WHERE key IN ({','.join('?' * len(part))})"
                for key, text in self.db.execute(sql, part):
                    found[key] = stored_reply(text)
        except (sqlite3.Error, ValueError) as exc:  # as in `get`
            self._give_up(exc)
        return found

    def put(self, key: str, backend: str, model: str, reply: Mapping[str, Any], endpoint: str) -> None:
        """Store a reply with the `endpoint` that made it (never a secret: a public URL); never
        raises (see the class), since the reply is already paid for."""
        if self.failed is not None:
            return
        stored = {**reply, "endpoint": endpoint}
        text = json.dumps(stored, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: SQLite takes only valid UTF-8; keep it escaped
            text = json.dumps(stored)
        try:
            self.db.execute(
                "INSERT OR REPLACE INTO replies (key, created, backend, model, reply) VALUES (?, ?, ?, ?, ?)",
                (key, time.time(), backend, model, text),
            )
        except sqlite3.Error as exc:
            self._give_up(exc)

    def stats(self) -> dict[str, Any]:
        rows = self.db.execute(
            "SELECT backend, model, COUNT(*), MIN(created), MAX(created) FROM replies"
            " GROUP BY backend, model ORDER BY COUNT(*) DESC"
        ).fetchall()
        return {
            "path": str(self.path),
            "bytes": sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*")),
            "replies": sum(r[2] for r in rows),
            "models": [
                {"backend": b, "model": m, "replies": n, "first": _date(first), "last": _date(last)}
                for b, m, n, first, last in rows
            ],
        }

    def entries(self, model: str | None = None, limit: int = 0) -> list[dict[str, Any]]:
        """Stored replies, newest first (`limit` 0: all): created (UTC), backend, model, reply."""
        sql = "SELECT created, backend, model, reply FROM replies"
        args: list[Any] = []
        if model is not None:
            sql += " WHERE model = ?"
            args.append(model)
        sql += " ORDER BY created DESC" + (" LIMIT ?" if limit else "")
        args += [limit] if limit else []
        out = []
        for created, backend, name, text in self.db.execute(sql, args):
            try:
                reply = json.loads(text)
            except ValueError:
                reply = {"content": None}
            out.append({"created": _date(created), "backend": backend, "model": name, "reply": reply})
        return out

    def completion_tokens(self, backend: str, model: str, limit: int = 2000) -> list[int]:
        """The completion tokens of the newest `limit` replies of one model (those that say), for a
        dry run's estimate of what replies to come will use."""
        sql = "SELECT reply FROM replies WHERE backend = ? AND model = ? ORDER BY created DESC LIMIT ?"
        counts = []
        for (text,) in self.db.execute(sql, (backend, model, limit)):
            try:
                count = json.loads(text).get("usage", {}).get("completion_tokens")
            except (ValueError, AttributeError):
                continue
            if count.__class__ is int and count >= 0:
                counts.append(count)
        return counts

    def holds(self) -> str:
        """The models it holds, for a message: `m (12), gpt-4o (3)`, or `no replies`."""
        models = self.stats()["models"]
        return ", ".join(f"{m['model']} ({m['replies']})" for m in models) or "no replies"

    def clear(self, model: str | None = None, older_than_s: float | None = None) -> int:
        """Delete replies (all, one model's, or those older than a number of seconds); return how many."""
        where: list[str] = []
        args: list[Any] = []
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if older_than_s is not None:
            where.append("created < ?")
            args.append(time.time() - older_than_s)
        sql = "DELETE FROM replies" + (" WHERE " + " AND ".join(where) if where else "")
        deleted = self.db.execute(sql, args).rowcount
        self.db.execute("VACUUM")
        return deleted
