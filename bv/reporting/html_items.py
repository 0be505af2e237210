"""Which items the HTML viewer shows, chosen in bounded memory.

A results folder can hold hundreds of thousands of rows, far more than a browser can show or
a report should hold. The viewer reads its inputs twice: first a verdict per (input, id, run),
a few bytes each, to rank the items (those whose inputs differ first, then those with a run
that is not right, then the rest by id); then only the rows of the first `limit` items, cut to
what a card shows (long texts shortened). The page says when items or runs were left out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from bv.core.images import image_paths
from bv.core.records import Choice, JudgedRow, Turn
from bv.core.records import natural_key as natural  # re-exported: html_parts and html_report sort by it
from bv.core.run_context import current

MAX_RUNS = 10  # rows per input shown on one card; the card's score still counts every run
MAX_TEXT = 6000  # characters of a response, judge reply or reasoning shown


class CardRow(TypedDict, total=False):
    """What a card keeps of a judged row (bv.core.records.JudgedRow's fields and types, a test checks):
    its verdict fields, the long texts shortened, the images as paths. Any may be missing from
    an old or hand-made row."""

    id: str
    run: int
    type: str
    subtype: str
    ans_type: str
    question: str
    choices: list[Choice]
    answer: list[str]
    hard: int | None
    undecided: bool
    decided_by: str
    judge_reason: str
    judge_error: str | None
    judge_model: str | None
    error: str | None
    refusal: str | None
    content_filter: str | None
    cut_off: bool
    reasoning_answer: str | None
    extracted: str | None
    response: str | None  # LONG_FIELDS: shortened
    judge_reply: str | None
    cot: str
    turns: list[Turn]  # only the final turn's reasoning, shortened (card_turns)
    images: list[str]


LONG_FIELDS = ("response", "judge_reply", "cot", "turns")
CARD_FIELDS = tuple(name for name in CardRow.__annotations__ if name not in (*LONG_FIELDS, "images"))
ShownRow = JudgedRow | CardRow  # what the viewer's readers take: a row as read, or as a card keeps it


class ItemCard(TypedDict):
    """One item's card: its first row, its rows by input, and (right, total) runs by input."""

    row: CardRow
    runs: defaultdict[int, list[CardRow]]
    tally: list[tuple[int, int]]


def verdict(row: ShownRow) -> str:
    """right, wrong, judge_error, undecided or error (the rollout failed), as `bv report` counts them."""
    if row.get("decided_by") == "error" or row.get("hard") is None:
        return "judge_error"
    if row.get("error"):
        return "error"
    if row.get("undecided"):
        return "undecided"
    return "right" if row.get("hard") == 1 else "wrong"


def row_images(row: JudgedRow) -> list[str]:
    """The row's image files: the `file://` URLs of its messages, else its `images` as written."""
    messages = row.get("messages")
    messages = messages if isinstance(messages, list) else []
    paths = [str(p) for p in image_paths([m for m in messages if isinstance(m, dict)])]
    return paths or [str(p) for p in row.get("images") or [] if isinstance(p, str)]


def card_images(row: CardRow) -> list[str]:
    """The image files of a card's row (row_images of the row it was made from)."""
    return list(row.get("images") or [])


def shorten(text: Any) -> Any:
    if isinstance(text, str) and len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + f"\n… [{len(text) - MAX_TEXT} more characters not shown]"
    return text


def card_turns(turns: Any) -> list[Turn]:
    """What a card keeps of a row's turns: the final turn's reasoning, shortened (the response is
    the final turn's content, kept apart)."""
    last = turns[-1] if isinstance(turns, list) and turns else None
    reasoning = last.get("reasoning") if isinstance(last, dict) else None
    return [cast(Turn, {"reasoning": shorten(reasoning)})] if isinstance(reasoning, str) and reasoning else []


def card_reasoning(row: CardRow) -> str | None:
    """The reasoning a card shows (of the row's final turn), or None."""
    turns = row.get("turns") or []
    return turns[-1].get("reasoning") if turns else None


def card_row(row: JudgedRow) -> CardRow:
    """What a card shows of a row: its verdict fields, long texts shortened, images as paths."""
    fields: Mapping[str, Any] = row
    out = {key: fields[key] for key in CARD_FIELDS if key in fields}
    out.update({key: shorten(fields[key]) for key in LONG_FIELDS if key in fields and key != "turns"})
    out["turns"] = card_turns(fields.get("turns"))
    out["images"] = row_images(row)
    return cast(CardRow, out)


def reply_notes(row: CardRow) -> list[str]:
    """What a row's reply was beside its verdict: a refusal, a content filter's stop, a cut-off,
    an answer only in the reasoning (bv report counts each apart)."""
    notes = []
    if row.get("refusal"):
        notes.append(f"refused: {row['refusal']}")
    if row.get("content_filter"):
        notes.append(f"content filter: {row['content_filter']}")
    if row.get("cut_off") is True:
        notes.append("cut off at the token limit")
    answer = row.get("reasoning_answer")
    if isinstance(answer, str):
        notes.append(f"answer only in the reasoning: {answer}")
    return notes


@dataclass
class Selection:
    """The items to show, in order, each {"row": first row, "runs": {input: rows}, "tally": ...}."""

    items: dict[str, ItemCard]
    order: list[str]
    differs: set[str]
    total: int  # items in the inputs
    counts: list[Counter] = field(default_factory=list)  # per input: rows by verdict

    @property
    def capped(self) -> bool:
        return len(self.order) < self.total


def _judged(rows: Iterable[JudgedRow]) -> Iterator[JudgedRow]:
    return (row for row in rows if isinstance(row, dict) and "hard" in row)


def select_items(rows_by_input: Sequence[Iterable[JudgedRow]], limit: int | None = None) -> Selection:
    """Rank every item, keep the rows of the first `limit` (default: the run's html_max_items,
    BV_HTML_MAX_ITEMS) and show them differing first, then by id; each input is iterated twice."""
    if limit is None:
        limit = current().limits.html_max_items
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
    shown_by_key: dict[str, defaultdict[int, list[CardRow]]] = {key: defaultdict(list) for key in order}
    first: dict[str, CardRow] = {}
    for index, rows in enumerate(rows_by_input):
        for row in _judged(rows):
            key = str(row.get("id"))
            shown_runs = shown_by_key.get(key)
            if shown_runs is None or len(shown_runs.get(index, ())) >= MAX_RUNS:
                continue
            shown = card_row(row)
            shown_runs[index].append(shown)
            first.setdefault(key, shown)
    order = [key for key in order if key in first]  # all of them, unless an input changed meanwhile
    items: dict[str, ItemCard] = {
        key: {
            "row": first[key],
            "runs": shown_by_key[key],
            "tally": [(sum(v == "right" for v in runs.values()), len(runs)) for runs in seen[key]],
        }
        for key in order
    }
    return Selection(items, order, differs & set(order), len(seen), counts)
