"""Reading and writing JSONL streams, with a clear `file:line: why` for every bad line.

Every stage reads records through `read_records` and writes through `JsonlWriter`; bad
lines are reported on stderr and counted in `Problems`, good lines keep flowing, and the
stage exits 1 at the end when any line was bad (0 with --skip-bad).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar, cast

import orjson

from bv.core.errors import BadRecord, Fatal, StdoutClosed
from bv.core.json_values import checked_value, parse_json, unparsable, without_lone_surrogates
from bv.core.run_context import current, worded
from bv.core.terminal import printable

STDIN = "-"


def max_line_bytes() -> int:
    """The longest JSONL line the current run reads or writes (BV_MAX_LINE_BYTES, bv.core.run_context)."""
    return current().limits.max_line_bytes


@dataclass
class Source:
    """Where a record came from, for messages and for resolving relative image paths."""

    name: str  # the path as the user gave it, or "<stdin>"
    line: int
    folder: Path | None  # the file's folder; None for stdin
    offset: int = -1  # where the line starts, in bytes (bv merge reads kept rows back from there)

    def __str__(self) -> str:
        return f"{self.name}:{self.line}"


SHOWN_ALIKE = 3  # messages of one kind shown before the rest are only counted
_NUMBERS = re.compile(r"\d+")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")  # a name in a message: the same cause


@dataclass
class Problems:
    """Bad input lines seen so far; reported as they happen (the first few of each kind, then one
    count at `finish`), counted for the exit code. Files that cannot be opened are counted apart."""

    stream: IO[str] = field(default_factory=lambda: sys.stderr)
    count: int = 0
    files: int = 0  # inputs that could not be opened
    _alike: dict[str, list] = field(default_factory=dict)  # kind: [times seen, first text]

    def report(self, where: Source | str, why: str) -> None:
        self.count += 1
        self._say(where, why)

    def warn(self, where: Source | str, why: str) -> None:
        self._say(where, f"warning: {why}")

    def cannot_open(self, path: str, exc: OSError) -> None:
        self.files += 1
        why = (
            "file not found" if isinstance(exc, FileNotFoundError) else f"cannot open: {exc.strerror or exc}"
        )
        self.stream.write(printable(f"bv: error: {path}: {why}") + "\n")
        self.stream.flush()

    def _say(self, where: Source | str, text: str) -> None:
        kind = _NUMBERS.sub("#", _QUOTED.sub("'…'", text)) if len(self._alike) < 1000 else "other"
        seen = self._alike.setdefault(kind, [0, text])
        seen[0] += 1
        if seen[0] <= SHOWN_ALIKE:
            self.stream.write(printable(f"bv: {where}: {worded(text)}") + "\n")
            self.stream.flush()

    def finish(self) -> None:
        """Say how many messages of each kind were held back."""
        for seen, text in self._alike.values():
            if seen > SHOWN_ALIKE:
                more = seen - SHOWN_ALIKE
                self.stream.write(
                    printable(f"bv: … and {more} more {'line' if more == 1 else 'lines'} like this ({text})")
                    + "\n"
                )
        self._alike.clear()
        self.stream.flush()


def _lines(stream: IO[bytes]) -> Iterator[tuple[bytes, bool]]:
    """(line, too_long) pairs; an over-long line is skipped up to its newline, never held whole."""
    limit = max_line_bytes()
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while True:  # drain the rest of the over-long line
                rest = stream.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield b"", True
        else:
            yield line, False


def _open(path: str) -> tuple[IO[bytes], str, Path | None]:
    if path == STDIN:
        return sys.stdin.buffer, "<stdin>", None
    # A 1 MB buffer: reading lines from 8 kB refills cost twice as much (0.5 us a 2.4 kB line).
    return open(path, "rb", buffering=READ_BUFFER), path, Path(path).resolve().parent


READ_BUFFER = 1 << 20


def read_json_lines(
    paths: Iterable[str], problems: Problems, fast: bool = False
) -> Iterator[tuple[Source, Any]]:
    """Yield (source, parsed JSON value) for every good line of every path ("-" is stdin).
    `fast`: parse with orjson where it gives the very value `parse_json` does (see
    `_parse_stream`): 3x faster, the same values and the same messages."""
    for path in paths or [STDIN]:
        try:
            stream, name, folder = _open(path)
        except OSError as exc:
            problems.cannot_open(path, exc)
            continue
        try:
            yield from _parse_stream(stream, name, folder, problems, fast)
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()


def _parse_stream(
    stream: IO[bytes], name: str, folder: Path | None, problems: Problems, fast: bool = False
) -> Iterator:
    """Parse each line with `parse_json`; with `fast`, with orjson first (3x faster), keeping its
    value when it is an object. Whatever orjson refuses (NaN, Infinity, 1e999, a lone surrogate,
    invalid UTF-8, nesting past 1024, a blank or torn line) goes the `parse_json` way, so every
    message is the same. orjson alone does not refuse an integer beyond ±2^63 (it gives a float,
    or an int below 2^64), so a line with a run of 19 digits anywhere (a number that may be one,
    or a text that holds one) goes the `parse_json` way too: found by one `translate` and one
    substring search over the bytes (a regular expression cost 20x that)."""
    number, offset = 0, 0
    loads = orjson.loads if fast else None
    nines, long_number = _DIGITS_AS_NINES, _LONG_NUMBER
    for raw, too_long in _lines(stream):
        number += 1
        where = Source(name, number, folder, offset)
        offset = offset + len(raw) if offset >= 0 and not too_long else -1  # unknown after a skipped line
        if too_long:
            problems.report(where, f"line longer than {max_line_bytes()} bytes (skipped)")
            continue
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            problems.warn(where, "UTF-8 byte order mark ignored")
            raw = raw[3:]
        if loads is not None and long_number not in raw.translate(nines):
            try:
                value = loads(raw)
            except orjson.JSONDecodeError:
                value = None
            if value.__class__ is dict:
                yield where, value
                continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.report(where, f"invalid UTF-8 at byte {exc.start}")
            continue
        if not text.strip():
            continue
        try:
            value = parse_json(text.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            torn = not raw.endswith(b"\n")
            why = (
                "torn last line (no newline; was the writer killed?)"
                if torn
                else f"invalid JSON: {exc.msg.removesuffix(' at')}"  # "Unterminated string starting at"
            )
            problems.report(where, f"{why} at column {exc.colno}" if not torn else why)
            continue
        except BadRecord as exc:
            problems.report(where, str(exc))
            continue
        except (RecursionError, ValueError) as exc:
            problems.report(where, unparsable(exc))
            continue
        try:
            value, warning = checked_value(value, raw)
        except BadRecord as exc:
            problems.report(where, str(exc))
            continue
        if warning:
            problems.warn(where, warning)
        yield where, value


# Every digit as a 9, then a run of 19 nines: a run of 19 digits, which every integer beyond ±2^63
# (and every number orjson would read otherwise than `parse_json`) holds; shorter ones are below 10^18.
_DIGITS_AS_NINES = bytes.maketrans(b"012345678", b"999999999")
_LONG_NUMBER = b"9" * 19

R = TypeVar("R")  # the record type a parser makes (bv.core.records' checks return TypedDicts)


def read_records(
    paths: Iterable[str],
    problems: Problems,
    parse: Callable[[dict[str, Any]], R],
    fast: bool = False,
) -> Iterator[tuple[Source, R]]:
    """Yield (source, record) for each line that parses and passes `parse`; report the rest.
    `fast`: see `read_json_lines`."""
    for where, value in read_json_lines(paths, problems, fast):
        try:
            if not isinstance(value, dict):
                raise BadRecord(f"expected a JSON object, got {type(value).__name__}")
            yield where, parse(value)
        except BadRecord as exc:
            problems.report(where, str(exc))


def _dumps(record: Any) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def fitting_line(record: dict[str, Any], limit: int | None = None) -> str:
    """The record as one JSON line that the reader accepts: lone surrogates replaced, and, for a
    row over the line limit (a model that wrote megabytes), its longest texts cut to their last
    characters (the answer is at the end; extraction reads only the tail) with a marker, and a
    warning on stderr. The row is never dropped for its size."""
    limit = max_line_bytes() - 1 if limit is None else limit  # the newline counts
    line = _dumps(record)
    try:
        size = len(line) if line.isascii() else len(line.encode("utf-8"))
    except UnicodeEncodeError:
        record = without_lone_surrogates(record)
        line = _dumps(record)
        size = len(line.encode("utf-8"))
    if size <= limit:
        return line
    low, high = 0, max(_text_lengths(record), default=0)  # binary search: the longest text kept
    best = _dumps(_cut_texts(record, 0))
    while low < high:
        keep = (low + high + 1) // 2
        candidate = _dumps(_cut_texts(record, keep))
        if len(candidate.encode("utf-8")) <= limit:
            low, best = keep, candidate
        else:
            high = keep - 1
    sys.stderr.write(
        printable(
            f"bv: warning: row id {record.get('id')!r} run {record.get('run')!r} is {size} bytes, over the"
            f" line limit of {limit + 1} (BV_MAX_LINE_BYTES); its texts longer than {low} characters"
            " keep only their end"
        )
        + "\n"
    )
    return best


def _text_lengths(value: Any) -> Iterator[int]:
    if isinstance(value, str):
        yield len(value)
    elif isinstance(value, list | dict):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _text_lengths(item)


def _cut_texts(value: Any, keep: int) -> Any:
    if isinstance(value, str) and len(value) > keep:
        return (
            f"[bv: {len(value) - keep} characters cut here, the row was over the line limit]"
            + (value[len(value) - keep :])
        )
    if isinstance(value, list):
        return [_cut_texts(v, keep) for v in value]
    if isinstance(value, dict):
        return {k: _cut_texts(v, keep) for k, v in value.items()}
    return value


def fitting_bytes(record: Mapping[str, Any]) -> bytes:
    """`fitting_line` as UTF-8, made by orjson (10x faster than json.dumps) when it can: a row
    under the line limit that orjson takes (every row but one with a lone surrogate, an integer
    beyond 64 bits, a key that is not a string or nesting past 255) is the same JSON value
    json.dumps writes, only floats spelt shorter (1e-7, not 1e-07); a NaN or infinite float, which
    no bv reader lets in, is written null (json.dumps wrote NaN, a line bv refuses to read back).
    The rest go `fitting_line`'s way."""
    try:
        line = orjson.dumps(record)
    except orjson.JSONEncodeError:
        return fitting_line(dict(record)).encode("utf-8")
    if len(line) < max_line_bytes():
        return line
    return fitting_line(dict(record)).encode("utf-8")


class JsonlWriter:
    """Writes one JSON object per line and flushes it, so a crash never loses a finished row.
    Every line it writes is one `read_json_lines` accepts (see `fitting_bytes`), and goes out in
    one `write` (see `WholeWrites`), so the lines of several writers into one pipe or file never
    interleave. Lines go to the stream's bytes layer when it has one (stdout, a file)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        import jsonlines  # imported here: only stages that write JSONL pay for it

        self._stream = stream or sys.stdout
        binary = getattr(self._stream, "buffer", None)
        if binary is not None:
            self._stream.flush()  # anything written as text before goes first
            self._writer = jsonlines.Writer(
                cast(IO[bytes], WholeWrites(binary, binary=True)), flush=True, dumps=fitting_bytes
            )
        else:  # a text-only stream (io.StringIO)
            self._writer = jsonlines.Writer(
                cast(IO[str], WholeWrites(self._stream, binary=False)), flush=True, dumps=fitting_line
            )

    def write(self, record: Mapping[str, Any]) -> None:
        try:
            self._writer.write(record)
        except BrokenPipeError as exc:
            raise StdoutClosed() from exc
        except OSError as exc:  # a full disk, a read-only or vanished file
            if self._stream is sys.stdout:
                silence_stdout()  # or the interpreter retries the flush at exit and prints a traceback
            raise Fatal(f"cannot write the output: {exc.strerror or exc}") from None


class WholeWrites:
    """A stream that holds what is written until `flush`, then sends it in one `write` (a row is
    never its text and then its newline: another writer's line could land between them). Into a
    pipe, POSIX keeps only writes of up to PIPE_BUF (4096) bytes whole, and a longer one waits
    for room with the pipe open to others' writes, so every write into a pipe is made under an
    exclusive record lock on it (`fcntl.lockf`), which every bv writer into that pipe takes too.
    Files keep each write whole (Linux holds the file's lock for a write)."""

    def __init__(self, stream: IO[Any], binary: bool) -> None:
        self._stream = stream
        self._empty: Any = b"" if binary else ""
        self._pending: list[Any] = []
        self._fd = pipe_fd(stream)

    def write(self, data: Any) -> int:
        if type(data) is not type(self._empty):  # as a real stream refuses it (jsonlines asks)
            raise TypeError(f"expected {type(self._empty).__name__}, got {type(data).__name__}")
        self._pending.append(data)
        return len(data)

    def flush(self) -> None:
        data = self._empty.join(self._pending)
        self._pending.clear()
        if not data:
            return
        write_whole(self._stream, data, self._fd)


def pipe_fd(stream: IO[Any]) -> int | None:
    """The stream's file descriptor when it is a pipe or FIFO (where writes take the lock)."""
    try:
        fd = stream.fileno()
        return fd if stat.S_ISFIFO(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):  # io.BytesIO and friends have no descriptor
        return None


def write_whole(stream: IO[Any], data: Any, pipe_fd: int | None = None) -> None:
    """Write whole lines in one `write` and flush them; under the pipe's lock when `pipe_fd` is
    a pipe (see `WholeWrites`)."""
    if pipe_fd is None:
        stream.write(data)
        stream.flush()
        return
    import fcntl

    try:
        fcntl.lockf(pipe_fd, fcntl.LOCK_EX)
    except OSError:  # a pipe that takes no locks: one write is still the best there is
        pipe_fd = None
    try:
        stream.write(data)
        stream.flush()
    finally:
        if pipe_fd is not None:
            fcntl.lockf(pipe_fd, fcntl.LOCK_UN)


def silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
