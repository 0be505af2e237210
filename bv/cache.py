"""The reply cache: every finished model reply, keyed by everything that determines it.

A SQLite database in WAL mode, so several bv processes (shards, the judge) can share one
file. Re-running an interrupted command finds its finished replies here and sends only
the rest. Errors are never stored, and neither is any API key: the key hashes the
backend, model, endpoint, messages (images by content hash), parameters, run and turn.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bv.images import content_hash, map_image_urls

CACHE_VERSION = 1


def default_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bv" / "cache.sqlite"


class ImageHashes:
    """Content hashes of image files, remembered by (path, size, mtime) so each is read once."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, int], str] = {}

    def __call__(self, path: Path) -> str:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key not in self._known:
            if len(self._known) > 10_000:
                self._known.clear()
            self._known[key] = content_hash(path)
        return self._known[key]


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
    """The cache key of one request; the same inputs give the same key on any machine."""
    payload = {
        "v": CACHE_VERSION,
        "backend": backend,
        "model": model,
        "endpoint": endpoint,
        "messages": map_image_urls(messages, lambda path: "sha256:" + image_hash(path)),
        "params": params,
        "run": run,
        "turn": turn,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _date(epoch: float) -> str:
    """A time stamp people read: ISO 8601, UTC, to the second."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ReplyCache:
    """get/put of finished replies; each put is its own transaction, durable once it returns."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS replies ("
            " key TEXT PRIMARY KEY, created REAL NOT NULL, backend TEXT NOT NULL,"
            " model TEXT NOT NULL, reply TEXT NOT NULL)"
        )

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, backend: str, model: str, reply: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO replies (key, created, backend, model, reply) VALUES (?, ?, ?, ?, ?)",
            (key, time.time(), backend, model, json.dumps(reply, ensure_ascii=False)),
        )

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

    def clear(self, model: str | None = None, older_than_s: float | None = None) -> int:
        """Delete replies (all, one model's, or those older than a number of seconds); return how many."""
        where, args = [], []
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
