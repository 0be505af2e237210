"""Which items a shard takes (`in_shard`, a stable hash of the id), and which shards a set of rows
came from: every row of `bv rollout --shard K/N` records `shard: "K/N"`, so `bv merge` and
`bv report` can say which shards are there and which are not (a missing shard looked like a
complete, smaller run before). Rows come from outside: a value that is not K/N is counted as
such, and what is kept is bounded by the rows read."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

MAX_COUNTS = 16  # distinct shard counts kept; rows of further counts are counted as unreadable


def in_shard(item_id: str, shard: tuple[int, int] | None) -> bool:
    """Whether an item belongs to shard k of n: a stable hash of its id, the same on every machine."""
    if shard is None:
        return True
    k, n = shard
    return int(hashlib.sha256(item_id.encode()).hexdigest(), 16) % n == k


def label(shard: tuple[int, int]) -> str:
    """A shard as rows record it and messages name it: `2/4`."""
    return f"{shard[0]}/{shard[1]}"


def parse(value: Any) -> tuple[int, int] | None:
    """(k, n) of a row's `shard`, None when it is not K/N with 0 <= K < N."""
    if value.__class__ is not str or len(value) > 40:
        return None
    k, sep, n = value.partition("/")
    if not (sep and k.isascii() and k.isdigit() and n.isascii() and n.isdigit()):
        return None
    shard = int(k), int(n)
    return shard if shard[0] < shard[1] else None


def ranges(numbers: Iterable[int]) -> str:
    """`0-2, 5, 7-9` of sorted numbers: linear in them, whatever the gaps."""
    parts: list[str] = []
    start = end = None
    for number in numbers:
        if end is not None and number == end + 1:
            end = number
            continue
        if start is not None:
            parts.append(f"{start}" if start == end else f"{start}-{end}")
        start = end = number
    if start is not None:
        parts.append(f"{start}" if start == end else f"{start}-{end}")
    return ", ".join(parts)


def gaps(present: list[int], count: int) -> list[int]:
    """The shards of 0..count-1 not in sorted `present`, at most 1,000 of them (a hostile count
    of 10**9 must not make a list of 10**9)."""
    missing: list[int] = []
    expected = 0
    for k in [*present, count]:
        while expected < k and len(missing) < 1000:
            missing.append(expected)
            expected += 1
        expected = k + 1
    return missing


class ShardTally:
    """The shards of the rows seen: per count N, the K present; rows without a shard; rows whose
    shard is not K/N."""

    def __init__(self) -> None:
        self.present: dict[int, set[int]] = {}
        self.unsharded = 0
        self.unreadable = 0
        self._last: Any = None  # rows come in runs of one shard: a repeat costs one comparison

    def add(self, value: Any) -> None:
        if value is None:
            self.unsharded += 1
            return
        if value == self._last and value.__class__ is str:
            return
        shard = parse(value)
        if shard is None or (shard[1] not in self.present and len(self.present) >= MAX_COUNTS):
            self.unreadable += 1
            return
        self._last = value
        self.present.setdefault(shard[1], set()).add(shard[0])

    def merge(self, other: ShardTally) -> None:
        for count, ks in other.present.items():
            self.present.setdefault(count, set()).update(ks)
        self.unsharded += other.unsharded
        self.unreadable += other.unreadable

    def as_json(self) -> dict[str, Any] | None:
        """The report's `provenance.shards`, None when no row records a shard."""
        if not self.present and not self.unreadable:
            return None
        return {
            "present": {str(n): sorted(ks) for n, ks in sorted(self.present.items())},
            "missing": {str(n): gaps(sorted(ks), n) for n, ks in sorted(self.present.items())},
            "unsharded_rows": self.unsharded,
            "unreadable": self.unreadable,
        }


def described(shards: dict[str, Any]) -> str:
    """`shards 0-1, 3 of 4` of a tally's as_json, for a summary line."""
    return (
        "; ".join(
            f"shard{'s' if len(ks) > 1 else ''} {ranges(ks)} of {n}" for n, ks in shards["present"].items()
        )
        or "no shards"
    )


def problems(shards: dict[str, Any] | None) -> list[str]:
    """What is wrong with a set of shards: one missing, counts mixed, rows with and without a
    shard, shard values that are not K/N. Empty when the shards make one whole run."""
    if shards is None:
        return []
    lines = []
    present, missing = shards["present"], shards["missing"]
    if len(present) > 1:
        lines.append(
            f"rows of shards of different counts ({described(shards)}): shards of one count split"
            " the items one way, and no other count's fills its gaps"
        )
    for n, gone in missing.items():
        if gone:
            more = "" if len(gone) < 1000 else " and more"
            lines.append(
                f"shard{'s' if len(gone) > 1 else ''} {ranges(gone)}{more} of {n} missing"
                f" (present: {ranges(present[n])}): the rows cover only part of the items"
            )
    if shards["unsharded_rows"] and present:
        lines.append(
            f"{shards['unsharded_rows']} rows record no shard beside rows of {described(shards)}:"
            " an unsharded run mixed with shards"
        )
    if shards["unreadable"]:
        lines.append(f"{shards['unreadable']} rows record a shard that is not K/N")
    return lines
