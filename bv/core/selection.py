"""Choosing which items to prompt: try a few on a new endpoint before paying for all 388 × 3.

Plain functions over items (as `items.parse_item` returns them). `--ids`, `--type` and
`--subtype` keep matching items; `--sample N` then draws N of them stratified by subtype;
`--limit N` keeps the first N of what is left. The sample depends only on the seed and the
set of items, never on their order in the file: each item is ranked by a hash of
(seed, id), and each subtype gives its lowest-ranked items.
"""

from __future__ import annotations

import difflib
import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar

from bv.core.settings import setting

T = TypeVar("T")


@dataclass(frozen=True)
class Selection:
    """Which items to keep; the empty selection keeps all of them, in order. Each setting is
    declared once (bv.core.settings): bv prompt's and bv eval's options are made from it."""

    ids: tuple[str, ...] = setting(
        (),
        "--ids",
        multiple=True,
        convert=lambda given: parse_ids(given),
        metavar="A,B,...",
        help="Only these item ids (repeatable).",
    )
    types: tuple[str, ...] = setting(
        (), "--type", multiple=True, convert=tuple, help="Only items of this type (repeatable; any case)."
    )
    subtypes: tuple[str, ...] = setting(
        (), "--subtype", multiple=True, convert=tuple, help="Only items of this subtype (repeatable)."
    )
    sample: int | None = setting(
        None,
        "--sample",
        kind=int,
        low=1,
        metavar="N",
        help="N items stratified by subtype (see --sample-seed).",
    )
    sample_seed: int = setting(
        0, "--sample-seed", kind=int, show_default=True, help="Which --sample to draw."
    )
    limit: int | None = setting(
        None, "-n", "--limit", kind=int, low=0, metavar="N", help="At most N items (after the other filters)."
    )

    @property
    def empty(self) -> bool:
        return self == Selection()


def parse_ids(values: Iterable[str]) -> tuple[str, ...]:
    """`--ids 3,17 --ids 42` -> ("3", "17", "42"), blanks dropped, first occurrence kept."""
    ids = (part.strip() for value in values for part in value.split(","))
    return tuple(dict.fromkeys(i for i in ids if i))


def _fold(text: Any) -> str:
    return " ".join(str(text).split()).casefold()


def matches(item: dict[str, Any], selection: Selection) -> bool:
    """Whether an item passes the id, type and subtype filters (types and subtypes ignore case)."""
    if selection.ids and str(item["id"]) not in selection.ids:
        return False
    if selection.types and _fold(item.get("type", "")) not in {_fold(t) for t in selection.types}:
        return False
    if selection.subtypes and _fold(item.get("subtype", "")) not in {_fold(s) for s in selection.subtypes}:
        return False
    return True


def rank(item_id: str, seed: int) -> str:
    """An item's place in the sample order for `seed`: stable across files and machines."""
    return hashlib.sha256(f"{seed}:{item_id}".encode()).hexdigest()


def quotas(sizes: dict[str, int], n: int) -> dict[str, int]:
    """How many of `n` each stratum gives: proportional to its size (largest remainders), and at
    least one from every stratum when `n` allows it."""
    total = sum(sizes.values())
    n = min(n, total)
    if total == 0:
        return {key: 0 for key in sizes}
    exact = {key: n * size / total for key, size in sizes.items()}
    share = {key: int(value) for key, value in exact.items()}
    by_remainder = sorted(sizes, key=lambda k: (-(exact[k] - share[k]), k))
    for key in by_remainder[: n - sum(share.values())]:
        share[key] += 1
    if n >= len(sizes):
        for key in sorted(k for k in sizes if share[k] == 0 and sizes[k] > 0):
            # the stratum furthest above its exact quota gives one (the larger on a tie)
            donor = max(
                sorted(k for k in share if share[k] > 1), key=lambda k: (share[k] - exact[k], share[k])
            )
            share[donor] -= 1
            share[key] += 1
    return share


def stratified_sample(
    items: list[T], n: int, seed: int, key: Callable[[Any], dict[str, Any]] = lambda x: x
) -> list[T]:
    """`n` of `items`, stratified by subtype, deterministic for a seed; in the items' order."""
    strata: dict[str, list[int]] = defaultdict(list)
    for index, entry in enumerate(items):
        strata[str(key(entry).get("subtype", "unknown"))].append(index)
    share = quotas({name: len(members) for name, members in strata.items()}, n)
    chosen: set[int] = set()
    for name, members in strata.items():
        ordered = sorted(members, key=lambda i: rank(str(key(items[i])["id"]), seed))
        chosen.update(ordered[: share[name]])
    return [entry for index, entry in enumerate(items) if index in chosen]


@dataclass
class Unmatched:
    """What the selection asked for and the input did not have (said on stderr)."""

    ids: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    subtypes: list[str] = field(default_factory=list)
    known: dict[str, dict[str, str]] = field(default_factory=dict)  # types, subtypes: folded -> as written

    def messages(self) -> list[str]:
        out = []
        for name, key, values in (
            ("`ids`", "ids", self.ids),
            ("`types`", "types", self.types),
            ("`subtypes`", "subtypes", self.subtypes),
        ):
            if values:
                out.append(
                    f"{name}: no item matches {', '.join(repr(v) for v in values)}{self._hint(key, values)}"
                )
        return out

    def _hint(self, key: str, values: list[str]) -> str:
        """` (did you mean 'Visual Tracking'?)` for a near miss of a name the input has."""
        known = self.known.get(key, {})
        close = [m for v in values for m in difflib.get_close_matches(_fold(v), list(known), n=1, cutoff=0.6)]
        if not close:
            return ""
        return " (did you mean " + " or ".join(repr(known[m]) for m in dict.fromkeys(close)) + "?)"


def select(
    entries: Iterable[T],
    selection: Selection,
    unmatched: Unmatched | None = None,
    key: Callable[[Any], dict[str, Any]] = lambda x: x,
) -> Iterator[T]:
    """The entries (items, or anything `key` maps to an item) the selection keeps, lazily when it
    can be (without --sample); `unmatched` is filled once the input is read to its end."""
    seen: dict[str, dict[str, str]] = {"ids": {}, "types": {}, "subtypes": {}}  # folded -> as written

    def note(entry: T) -> bool:
        item = key(entry)
        seen["ids"].setdefault(str(item["id"]), str(item["id"]))
        for name, field_name in (("types", "type"), ("subtypes", "subtype")):
            value = item.get(field_name, "")
            seen[name].setdefault(_fold(value), str(value))
        return matches(item, selection)

    kept: Iterable[T] = (entry for entry in entries if note(entry))
    if selection.sample is not None:
        kept = stratified_sample(list(kept), selection.sample, selection.sample_seed, key)
    if selection.limit is not None:
        kept = islice(kept, selection.limit)
    yield from kept
    if unmatched is not None and selection.limit is None:
        unmatched.ids = [i for i in selection.ids if i not in seen["ids"]]
        unmatched.types = [t for t in selection.types if _fold(t) not in seen["types"]]
        unmatched.subtypes = [s for s in selection.subtypes if _fold(s) not in seen["subtypes"]]
        unmatched.known = {"types": seen["types"], "subtypes": seen["subtypes"]}
