"""The merge stage: combine runs and shards into one row per (id, run); a later file wins.

Merging keeps no row in memory: per (id, run) it remembers where the winning row is (file
and byte offset) and who made it (model, judge version, for the conflict warnings), then
copies the winning lines out. Only rows read from stdin, which cannot be read twice, are kept.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bv.core.atomic import atomic_output
from bv.core.errors import Fatal, StdoutClosed
from bv.core.json_values import without_lone_surrogates
from bv.core.jsonl import Problems, Source, pipe_fd, write_whole
from bv.core.records import natural_key, row_key
from bv.core.shards import ShardTally

_FILE_BITS, _MADE_BY_BITS = 16, 24  # a kept row is one int: offset | made-by index | file index
_IN_MEMORY = (1 << _FILE_BITS) - 1  # the file index of a row kept whole (read from stdin)
_BOM = b"\xef\xbb\xbf"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # a JSON escape of a UTF-16 surrogate


@dataclass
class MergeResult:
    kept: dict[tuple[str, int], int] = field(default_factory=dict)  # (id, run) -> where its row is
    rows: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)  # stdin rows only
    files: list[str] = field(default_factory=list)
    made_by: list[tuple[Any, Any]] = field(default_factory=list)  # distinct (model, judge_version)
    rows_in: int = 0
    replaced: int = 0
    conflicts: list[str] = field(default_factory=list)  # bv.api's: same (id, run), other model or judge
    shards: ShardTally = field(default_factory=ShardTally)  # the rows' `shard`, each row read counted

    def __len__(self) -> int:
        return len(self.kept)


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, type(None))) else json.dumps(value, sort_keys=True)


def merge_rows(
    records: Iterable[tuple[Source, dict[str, Any]]], problems: Problems | None = None
) -> MergeResult:
    """Keep the last row seen for each (id, run). A row replacing one made by another model or
    judge version is warned about through `problems` (the first few of a kind, then a count), or
    without it listed in `conflicts` (bv.api, whose rows are in memory anyway)."""
    result = MergeResult()
    file_index: dict[str, int] = {}
    made_by_index: dict[tuple[Any, Any], int] = {}
    ids: dict[str, str] = {}  # one string per id, shared by its runs
    for source, record in records:
        item, run = row_key(record)
        key = (ids.setdefault(item, item), run)
        result.rows_in += 1
        result.shards.add(record.get("shard"))
        made_by = (record.get("model"), record.get("judge_version"))
        hashable = (_hashable(made_by[0]), _hashable(made_by[1]))
        who = made_by_index.get(hashable)
        if who is None:
            who = made_by_index[hashable] = len(result.made_by)
            result.made_by.append(made_by)
            if who >= 1 << _MADE_BY_BITS:
                raise Fatal(f"{source}: more than {1 << _MADE_BY_BITS} distinct models and judge versions")
        if source.offset >= 0 and source.folder is not None:
            where = file_index.setdefault(source.name, len(file_index))
            if where >= _IN_MEMORY:
                raise Fatal(f"bv merge reads at most {_IN_MEMORY - 1} files at once")
            result.rows.pop(key, None)
        else:
            where = _IN_MEMORY
            result.rows[key] = record
        old = result.kept.pop(key, None)  # re-inserted below, so the order is that of the winning rows
        if old is not None:
            result.replaced += 1
            old_by = result.made_by[(old >> _FILE_BITS) & ((1 << _MADE_BY_BITS) - 1)]
            for i, name in enumerate(("model", "judge_version")):
                if old_by[i] != made_by[i] and name in record:
                    row_at = f"{source}: id {key[0]} run {key[1]}"  # not in `why`: one kind per pair
                    why = f"replaces a row with {name} {old_by[i]!r} by one with {made_by[i]!r}"
                    if problems is None:
                        result.conflicts.append(f"{row_at} {why}")
                    else:
                        problems.warn(row_at, why)
        result.kept[key] = (source.offset << (_FILE_BITS + _MADE_BY_BITS)) | (who << _FILE_BITS) | where
    result.files = list(file_index)
    return result


def ordered_keys(result: MergeResult, sort: bool) -> list[tuple[str, int]]:
    keys = list(result.kept)
    if sort:
        natural = {item: natural_key(item) for item in dict.fromkeys(item for item, _ in keys)}
        keys.sort(key=lambda key: (natural[key[0]], key[1]))
    return keys


MAX_OPEN_INPUTS = 16  # input files held open at once while the kept rows are copied out
_BATCH_BYTES = 1 << 16  # whole lines gathered into one write


class _Inputs:
    """The merged files, opened as rows are copied from them and closed least recently used
    first, so 200 shards need no more than MAX_OPEN_INPUTS descriptors (`ulimit -n 64`)."""

    def __init__(self, names: list[str]) -> None:
        self._names = names
        self._open: OrderedDict[int, IO[bytes]] = OrderedDict()

    def get(self, index: int) -> IO[bytes]:
        stream = self._open.get(index)
        if stream is not None:
            self._open.move_to_end(index)
            return stream
        if len(self._open) >= MAX_OPEN_INPUTS:
            self._open.popitem(last=False)[1].close()
        try:
            stream = self._open[index] = open(self._names[index], "rb")
        except OSError as exc:
            raise Fatal(f"{self._names[index]}: cannot read it again: {exc.strerror or exc}") from None
        return stream

    def close(self) -> None:
        while self._open:
            self._open.popitem()[1].close()


def _copy_rows(result: MergeResult, keys: list[tuple[str, int]], out: IO[bytes]) -> None:
    """Write the kept rows in `keys` order: lines copied from their files, stdin rows serialised;
    whole lines only in each write (bv.core.jsonl.write_whole), so no row is torn between two."""
    inputs, batch, size = _Inputs(result.files), [], 0
    pipe = pipe_fd(out)
    try:
        for key in keys:
            line = _kept_line(result, key, inputs)
            batch.append(line)
            size += len(line)
            if size >= _BATCH_BYTES:
                write_whole(out, b"".join(batch), pipe)
                batch, size = [], 0
        write_whole(out, b"".join(batch), pipe)
    finally:
        inputs.close()


def _kept_line(result: MergeResult, key: tuple[str, int], inputs: _Inputs) -> bytes:
    packed = result.kept[key]
    where = packed & _IN_MEMORY
    if where == _IN_MEMORY:
        return _json_line(result.rows[key])
    offset = packed >> (_FILE_BITS + _MADE_BY_BITS)
    stream = inputs.get(where)
    if stream.tell() != offset:
        stream.seek(offset)
    line = stream.readline()
    if offset == 0 and line.startswith(_BOM):
        line = line[3:]
    if _SURROGATE_ESCAPE.search(line):  # written as reading it gave it: lone ones replaced
        return _json_line(without_lone_surrogates(json.loads(line)))
    return line.rstrip(b"\r\n") + b"\n"


def _json_line(row: dict[str, Any]) -> bytes:
    """A row as bv writes JSONL (compact, UTF-8), escaped where UTF-8 cannot hold it (lone surrogates)."""
    try:
        return (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(row, separators=(",", ":")) + "\n").encode("ascii")


def write_rows(result: MergeResult, keys: list[tuple[str, int]], output: Path | None) -> None:
    """Write the kept rows to stdout, or atomically to `output` (a temp file renamed into place)."""
    if output is None:
        try:
            _copy_rows(result, keys, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        except BrokenPipeError as exc:
            raise StdoutClosed() from exc
        except OSError as exc:
            from bv.core.jsonl import silence_stdout

            silence_stdout()
            raise Fatal(f"cannot write the output: {exc.strerror or exc}") from None
        return
    with atomic_output(output, binary=True) as stream:
        _copy_rows(result, keys, stream)


def check_inputs(inputs: tuple[str, ...]) -> None:
    """Every input must be readable before anything is merged: a missing shard is not a smaller merge."""
    for path in inputs:
        if path != "-" and not (os.path.isfile(path) and os.access(path, os.R_OK)):
            why = "no such file" if not os.path.exists(path) else "not a readable file"
            raise Fatal(f"{path}: {why}; nothing merged, nothing written")
