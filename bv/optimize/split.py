"""The train / selection / test split: deterministic, stratified by subtype, written to the run folder.

Each subtype's items are ordered by a hash of (seed, id) and cut by the ratio, the shares rounded
by largest remainder within the subtype, so every part holds each subtype in proportion and the
same items with the same seed give the same split on any machine, whatever the file's order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bv.core.errors import BadRecord

PARTS = ("train", "selection", "test")
DEFAULT_RATIO = (2, 2, 6)  # chosen by bench/optimize_sim.py (docs/optimize.md): about 66 / 88 / 234 of 388
MAX_SPLIT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Split:
    """Item ids by part; `method` says how they were chosen (written with them)."""

    train: tuple[str, ...]
    selection: tuple[str, ...]
    test: tuple[str, ...]
    method: str

    def part(self, name: str) -> tuple[str, ...]:
        return {"train": self.train, "selection": self.selection, "test": self.test}[name]

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, **{name: list(self.part(name)) for name in PARTS}}


def parse_ratio(text: str) -> tuple[int, int, int]:
    """`2:1:7` -> (2, 1, 7); every share a whole number, train, selection and test above 0."""
    pieces = text.split(":")
    try:
        shares = tuple(int(p) for p in pieces)
    except ValueError:
        shares = ()
    if len(shares) != 3 or min(shares) <= 0:
        raise ValueError(
            f"a ratio is three positive whole numbers train:selection:test, like 2:1:7, not {text!r}"
        )
    return shares[0], shares[1], shares[2]


def _shares(n: int, ratio: Sequence[int]) -> list[int]:
    """n cut in the ratio, by largest remainder (ties to the later part: test, then selection)."""
    total = sum(ratio)
    exact = [n * r / total for r in ratio]
    counts = [int(x) for x in exact]
    order = sorted(range(len(ratio)), key=lambda i: (exact[i] - counts[i], i), reverse=True)
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


def _rank(seed: int, item_id: str) -> str:
    return hashlib.sha256(f"{seed}\0{item_id}".encode()).hexdigest()


def stratified_split(
    subtypes: Mapping[str, str], ratio: Sequence[int] = DEFAULT_RATIO, seed: int = 0
) -> Split:
    """Split items (id -> subtype) by `ratio`, within each subtype."""
    strata: dict[str, list[str]] = {}
    for item_id, subtype in subtypes.items():
        strata.setdefault(subtype, []).append(item_id)
    parts: list[list[str]] = [[], [], []]
    for subtype in sorted(strata):
        ids = sorted(strata[subtype], key=lambda i: _rank(seed, i))
        start = 0
        for part, count in zip(parts, _shares(len(ids), ratio), strict=True):
            part.extend(ids[start : start + count])
            start += count
    shown = ":".join(str(r) for r in ratio)
    method = f"stratified by subtype, ratio {shown}, seed {seed} (sha256 of seed and id)"
    return Split(tuple(parts[0]), tuple(parts[1]), tuple(parts[2]), method)


def read_split(path: Path, known: Sequence[str]) -> Split:
    """A split given with --split: {"train": [...], "selection": [...], "test": [...]} naming
    items of the input, each in one part at most; BadRecord saying what is wrong."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SPLIT_BYTES + 1)
    except OSError as exc:
        raise BadRecord(f"`split` {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SPLIT_BYTES:
        raise BadRecord(f"`split` {path}: over {MAX_SPLIT_BYTES // 2**20} MiB")
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        raise BadRecord(f"`split` {path}: not JSON") from None
    if not isinstance(obj, dict):
        raise BadRecord(f'`split` {path}: expected {{"train": [...], "selection": [...], "test": [...]}}')
    known_ids = set(known)
    seen: dict[str, str] = {}
    parts: dict[str, tuple[str, ...]] = {}
    for name in PARTS:
        ids = obj.get(name)
        if not isinstance(ids, list) or not ids:
            raise BadRecord(f"`split` {path}: {name!r} must be a non-empty list of item ids")
        for value in ids:
            item_id = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
            if item_id is None:
                raise BadRecord(f"`split` {path}: {name}: an item id is a string, not {value!r:.60}")
            if item_id not in known_ids:
                raise BadRecord(f"`split` {path}: {name}: {item_id!r:.80} is not an item of the input")
            if item_id in seen:
                raise BadRecord(f"`split` {path}: {item_id!r:.80} is in both {seen[item_id]} and {name}")
            seen[item_id] = name
        parts[name] = tuple(str(v) for v in ids)
    return Split(parts["train"], parts["selection"], parts["test"], f"given ({path.name})")
