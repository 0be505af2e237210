"""Batches submitted and not yet collected, recorded so that a re-run resumes them.

Beside the reply cache, in the folder `<cache file>.batches/` (by default
`~/.cache/bv/cache.sqlite.batches/`), one JSON file per batch: the endpoint and model, the
input file's id, the batch's id once created, and the requests it holds (their cache keys, in
input order). Each file is written whole or not at all (bv.core.atomic): first when the input
file is uploaded, again when the batch is created, and it is removed once every result is in
the cache. A re-run whose requests are not in the cache looks here first and polls the batch
that holds them instead of submitting them again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bv.core.atomic import atomic_output

VERSION = 1
MAX_RECORD_BYTES = 64 * 1024 * 1024  # a record names at most 50,000 keys of 64 characters


def folder_for(cache_path: Path) -> Path:
    return cache_path.with_name(cache_path.name + ".batches")


@dataclass
class BatchRecord:
    """One batch job bv submitted: where, what for, and which requests it holds."""

    endpoint: str  # the public URL (never a key)
    kind: str  # openai or azure
    model: str
    stage: str  # rollout or judge
    keys: list[str]  # the requests' cache keys (each line's custom_id), in input order
    input_file_id: str | None = None
    batch_id: str | None = None
    created: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    version: int = VERSION

    @property
    def name(self) -> str:
        """The record's file name: a hash of its requests, known before the batch exists."""
        return hashlib.sha256("\n".join(self.keys).encode()).hexdigest()[:20] + ".json"


class BatchState:
    """The records of one cache's batches."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def save(self, record: BatchRecord) -> Path:
        path = self.folder / record.name
        with atomic_output(path) as out:
            json.dump(asdict(record), out, indent=1)
        return path

    def remove(self, record: BatchRecord) -> None:
        (self.folder / record.name).unlink(missing_ok=True)

    def records(self, endpoint: str, model: str) -> list[BatchRecord]:
        """The readable records of this endpoint and model; others (and broken files) are left be."""
        found = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            record = _read(path)
            if record is not None and record.endpoint == endpoint and record.model == model:
                found.append(record)
        return found

    def claim(self, endpoint: str, model: str, wanted: Iterable[str]) -> list[tuple[BatchRecord, set[str]]]:
        """The recorded batches that hold some of the wanted requests, each with those it holds
        (a request in two records is claimed by the first)."""
        left = set(wanted)
        claimed = []
        for record in self.records(endpoint, model):
            mine = left.intersection(record.keys)
            if mine:
                claimed.append((record, mine))
                left -= mine
        return claimed


def _read(path: Path) -> BatchRecord | None:
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None
    keys = data.get("keys")
    text = ("endpoint", "kind", "model", "stage")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        return None
    if not all(isinstance(data.get(name), str) for name in text):
        return None
    ids = [data.get(name) for name in ("input_file_id", "batch_id")]
    if not all(value is None or isinstance(value, str) for value in ids):
        return None
    return BatchRecord(
        endpoint=data["endpoint"],
        kind=data["kind"],
        model=data["model"],
        stage=data["stage"],
        keys=keys,
        input_file_id=ids[0],
        batch_id=ids[1],
        created=str(data.get("created", "")),
    )
