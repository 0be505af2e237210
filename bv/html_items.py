"""Which items the HTML viewer shows, chosen in bounded memory.

A results folder can hold hundreds of thousands of rows, far more than a browser can show or
a report should hold. The viewer reads its inputs twice: first a verdict per (input, id, run),
a few bytes each, to rank the items (those whose inputs differ first, then those with a run
that is not right, then the rest by id); then only the rows of the first `limit` items, cut to
what a card shows (long texts shortened). The page says when items or runs were left out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bv import environment
from bv.images import image_paths
from bv.records import natural_key as natural  # re-exported: html_parts and html_report sort by it

MAX_ITEMS = environment.integer("BV_HTML_MAX_ITEMS", 500)  # cards on one page
MAX_RUNS = 10  # rows per input shown on one card; the card's score still counts every run
MAX_TEXT = 6000  # characters of a response, judge reply or reasoning shown
CARD_FIELDS = (
    "id",
    "run",
    "type",
    "subtype",
    "ans_type",
    "question",
    "choices",
    "answer",
    "hard",
    "undecided",
    "decided_by",
    "judge_reason",
    "judge_error",
    "judge_model",
    "error",
    "extracted",
)
LONG_FIELDS = ("response", "judge_reply", "cot")


def verdict(row: dict[str, Any]) -> str:
    """right, wrong, judge_error, undecided or error (the rollout failed), as `bv report` counts them."""
    if row.get("decided_by") == "error" or row.get("hard") is None:
        return "judge_error"
    if row.get("error"):
        return "error"
    if row.get("undecided"):
        return "undecided"
    return "right" if row.get("hard") == 1 else "wrong"


def row_images(row: dict[str, Any]) -> list[str]:
    """The row's image files: the `file://` URLs of its messages, else its `images` as written."""
    messages = row.get("messages")
    messages = messages if isinstance(messages, list) else []
    paths = [str(p) for p in image_paths([m for m in messages if isinstance(m, dict)])]
    return paths or [str(p) for p in row.get("images") or [] if isinstance(p, str)]


def shorten(text: Any) -> Any:
    if isinstance(text, str) and len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + f"\n… [{len(text) - MAX_TEXT} more characters not shown]"
    return text


def card_row(row: dict[str, Any]) -> dict[str, Any]:
    """What a card shows of a row: its verdict fields, long texts shortened, images as paths."""
    out = {key: row[key] for key in CARD_FIELDS if key in row}
    out.update({key: shorten(row[key]) for key in LONG_FIELDS if key in row})
    out["images"] = row_images(row)
    return out


@dataclass
class Selection:
    """The items to show, in order, each {"row": first row, "runs": {input: rows}, "tally": ...}."""

    items: dict[str, dict[str, Any]]
    order: list[str]
    differs: set[str]
    total: int  # items in the inputs
    counts: list[Counter] = field(default_factory=list)  # per input: rows by verdict

    @property
    def capped(self) -> bool:
        return len(self.order) < self.total


def _judged(rows: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    return (row for row in rows if isinstance(row, dict) and "hard" in row)


def select_items(rows_by_input: Sequence[Iterable[dict[str, Any]]], limit: int = MAX_ITEMS) -> Selection:
    """Rank every item, keep the rows of the first `limit` and show them differing first, then by
    id; each input is iterated twice."""
    seen: dict[str, list[dict[Any, str]]] = {}
    failing: set[str] = set()  # items with a run that is not right
    counts: list[Counter[str]] = [Counter() for _ in rows_by_input]
    for index, rows in enumerate(rows_by_input):
        for row in _judged(rows):
            key = str(row.get("id"))
            runs = seen.setdefault(key, [{} for _ in rows_by_input])
            runs[index][row.get("run", 0)] = v = verdict(row)
            counts[index][v] += 1
            if v != "right":
                failing.add(key)
    pair = len(rows_by_input) == 2
    differs = {
        key
        for key, (a, b) in ((k, v) for k, v in seen.items() if pair)
        if any((a[run] == "right") != (b[run] == "right") for run in a.keys() & b.keys())
    }
    chosen = sorted(
        seen,
        key=lambda key: (
            key not in differs,
            key not in failing,
            natural(key),
            key,
        ),
    )[:limit]
    order = sorted(chosen, key=lambda key: (key not in differs, natural(key), key))  # shown by id
    items: dict[str, dict[str, Any]] = {
        key: {
            "row": None,
            "runs": defaultdict(list),
            "tally": [(sum(v == "right" for v in runs.values()), len(runs)) for runs in seen[key]],
        }
        for key in order
    }
    for index, rows in enumerate(rows_by_input):
        for row in _judged(rows):
            item = items.get(str(row.get("id")))
            if item is None or len(item["runs"].get(index, ())) >= MAX_RUNS:
                continue
            shown = card_row(row)
            item["runs"][index].append(shown)
            item["row"] = item["row"] or shown
    return Selection(items, order, differs & set(order), len(seen), counts)
