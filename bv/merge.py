"""The merge stage: combine runs and shards into one row per (id, run); a later file wins."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bv.errors import Fatal
from bv.jsonl import Source
from bv.records import natural_key, row_key


@dataclass
class MergeResult:
    rows: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    rows_in: int = 0
    replaced: int = 0
    conflicts: list[str] = field(default_factory=list)  # same (id, run), different model or judge


def merge_rows(records: Iterable[tuple[Source, dict[str, Any]]]) -> MergeResult:
    """Keep the last row seen for each (id, run), remembering where rows disagreed on how they were made."""
    result = MergeResult()
    for source, record in records:
        key = row_key(record)
        result.rows_in += 1
        old = result.rows.pop(key, None)  # re-inserted below, so the order is that of the winning rows
        if old is not None:
            result.replaced += 1
            for name in ("model", "judge_version"):
                if old.get(name) != record.get(name) and name in record:
                    result.conflicts.append(
                        f"{source}: id {key[0]} run {key[1]} replaces a row with {name}"
                        f" {old.get(name)!r} by one with {record.get(name)!r}"
                    )
        result.rows[key] = record
    return result


def ordered_rows(result: MergeResult, sort: bool) -> list[dict[str, Any]]:
    rows = list(result.rows.values())
    if sort:
        rows.sort(key=lambda r: (natural_key(str(r["id"])), r.get("run", 0)))
    return rows


def write_rows(rows: list[dict[str, Any]], output: Path | None) -> None:
    """Write rows to stdout, or atomically to `output` (a temp file renamed into place)."""
    from bv.jsonl import JsonlWriter

    if output is None:
        writer = JsonlWriter()
        for row in rows:
            writer.write(row)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)  # as an ordinary new file would be, not mkstemp's 0600
    except OSError as exc:
        raise Fatal(f"cannot write {output}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            writer = JsonlWriter(stream)
            for row in rows:
                writer.write(row)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, output)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
