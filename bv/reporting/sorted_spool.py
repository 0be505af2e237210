"""Records put in order by a key on disk, in memory that does not grow with their number: what
`bv export` needs to write each run's results in natural id order from any number of rows.

Each record's bytes go to one data file as they come; its key and place (offset, size) go to a
list of at most `CHUNK_ENTRIES` entries, which, when full, is sorted and written out as a sorted
run. Reading merges the runs (heapq.merge), `FAN_IN` files open at most (more runs are first
merged into fewer, as often as needed), and reads each record back from its place. Keys are bytes
whose order is the wanted order (`natural_bytes` spells `bv.core.records.natural_key` so) and no
key is a prefix of another, so entries sort as plain bytes. The files live in a folder of their
own under TMPDIR (tempfile's rule) and go when the spool is closed, on any error or signal too;
an OSError names that folder."""

from __future__ import annotations

import contextlib
import heapq
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from bv.core.errors import Fatal

CHUNK_ENTRIES = 1 << 15  # entries sorted in memory at a time (a few MB)
FAN_IN = 32  # sorted runs merged at once: the files open at a time
_PLACE = struct.Struct(">QI")  # a record's offset and size in the data file, after its key
_FRAME = struct.Struct(">I")  # an entry's length, before it in a sorted run
_BUFFER = 1 << 16
_DIGITS = re.compile(r"([0-9]+)")  # as natural_key splits


class SortedSpool:
    """Records added with a key, read back in key order (`sorted`); close it when done."""

    def __init__(self) -> None:
        try:
            self.folder = Path(tempfile.mkdtemp(prefix="bv-export-"))
            self._data: IO[bytes] = open(self.folder / "data", "w+b", buffering=_BUFFER)
        except OSError as exc:
            raise Fatal(f"cannot write temporary files (TMPDIR): {exc.strerror or exc}") from None
        self._end = 0
        self._entries: list[bytes] = []
        self._runs: list[Path] = []

    def add(self, key: bytes, data: bytes) -> None:
        with self._named():
            self._entries.append(key + _PLACE.pack(self._end, len(data)))
            self._data.write(data)
            self._end += len(data)
            if len(self._entries) >= CHUNK_ENTRIES:
                self._spill()

    def sorted(self) -> Iterator[tuple[bytes, bytes]]:
        """(key, data) of every record, in key order."""
        with self._named():
            self._data.flush()
            if self._runs and self._entries:
                self._spill()
            while len(self._runs) > FAN_IN:
                first, self._runs = self._runs[:FAN_IN], self._runs[FAN_IN:]
                self._runs.append(self._merged(first))
        with self._named(), contextlib.ExitStack() as stack:
            if self._runs:
                streams = [stack.enter_context(open(run, "rb", buffering=_BUFFER)) for run in self._runs]
                entries: Iterable[bytes] = heapq.merge(*(_entries(stream) for stream in streams))
            else:
                self._entries.sort()
                entries = self._entries
            fd = self._data.fileno()
            for entry in entries:
                offset, size = _PLACE.unpack_from(entry, len(entry) - _PLACE.size)
                data = os.pread(fd, size, offset)
                if len(data) != size:
                    raise OSError(f"{self.folder / 'data'} is shorter than what was written to it")
                yield entry[: -_PLACE.size], data

    def close(self) -> None:
        self._data.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _spill(self) -> None:
        """The entries so far, sorted, as one more sorted run."""
        self._entries.sort()
        path = self.folder / f"run-{len(self._runs)}"
        self._write_run(path, self._entries)
        self._entries = []
        self._runs.append(path)

    def _merged(self, runs: list[Path]) -> Path:
        """`runs` merged into one new sorted run; they are removed."""
        path = self.folder / f"merged-{runs[0].name}"
        with contextlib.ExitStack() as stack:
            streams = [stack.enter_context(open(run, "rb", buffering=_BUFFER)) for run in runs]
            self._write_run(path, heapq.merge(*(_entries(stream) for stream in streams)))
        for run in runs:
            run.unlink()
        return path

    @staticmethod
    def _write_run(path: Path, entries: Iterable[bytes]) -> None:
        with open(path, "xb", buffering=_BUFFER) as out:
            pack = _FRAME.pack
            for entry in entries:
                out.write(pack(len(entry)))
                out.write(entry)

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise Fatal(
                f"cannot write temporary files in {self.folder} (TMPDIR): {exc.strerror or exc}"
            ) from None


def _entries(stream: IO[bytes]) -> Iterator[bytes]:
    read, unpack = stream.read, _FRAME.unpack
    while head := read(_FRAME.size):
        yield read(unpack(head)[0])


def natural_bytes(text: str) -> bytes:
    """`natural_key(text)` as bytes in the same order, no one a prefix of another: each part a
    tag (1 digits, 2 other text) and its spelling, the key closed by a 0 byte. Digits: their
    count without leading zeros (4 bytes), those digits, then the digits as written and a 0;
    text: UTF-8 (code point order; lone surrogates kept) with 0 bytes written 0 1, closed by 0 0."""
    out = bytearray()
    for part in _DIGITS.split(text):
        if part.isascii() and part.isdecimal():
            digits = part.lstrip("0") or "0"
            out += b"\x01" + len(digits).to_bytes(4, "big") + digits.encode() + part.encode() + b"\x00"
        elif part:
            out += b"\x02" + part.encode("utf-8", "surrogatepass").replace(b"\x00", b"\x00\x01") + b"\x00\x00"
    out += b"\x00"
    return bytes(out)
