"""Rule-based judging: decide what rules can decide for sure, and say "undecided" otherwise.

Choice items are decided when the answer is a label in a common form (`B`, `(B)`, `B.`,
`Option B`, lower case), an option's exact text, or an option's label leading other text
(`B. because …`, or `B` alone on the first line: the label decides, so text after it never reaches
an LLM judge; only another option's exact text after it is left undecided). Blank items are
decided when the answer equals an accepted gold after normalising case, spaces, brackets and
trailing punctuation, when both are numbers, or when both are number tuples of the same shape
(coordinates), compared exactly (as decimals): then different values are decided wrong. Everything else is
left to the LLM judge.
docs/judging.md lists every rule with examples; bump RULES_VERSION when one changes.
"""

from __future__ import annotations

import functools
import operator
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from bv.core.records import Choice, RolloutRow

RULES_VERSION = "4"

# A label alone: B  (B)  B.  B)  b  Option B  option (b)  Answer: B  (labels need not be letters)
_LABEL_FORM = re.compile(
    r"^(?:(?:option|choice|answer)\s*(?:[:：]\s*)?)?\(?([^\s().:：]+)\)?[.):]?$", re.IGNORECASE
)
# A label leading other text: B. red circle  (B) it is blue  Option B: the blue one  B - blue, or
# a label alone on its first line, whatever the lines after it say (issue 34: `B\n## Ground
# Truth\n…` is decided here, never sent to an LLM judge that the text after it may address)
_LABEL_WITH_TEXT = re.compile(
    r"^(?:(?:option|choice|answer)\s*(?:[:：]\s*)?)?\(?([^\s().:：,]+)\)?"
    r"(?:(?:[.):：,]|\s[-–—])\s+|[.):：,]?[^\S\n]*\n\s*)(.+)$",
    re.DOTALL | re.IGNORECASE,
)
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
        " fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_TUPLE = re.compile(rf"^{_NUMBER}(?:,{_NUMBER})*$")
_BRACKETS = "()[]{}<>"
_OPENING = _BRACKETS[::2]


@dataclass(frozen=True)
class Verdict:
    """1 or 0 when the rules decide, None when they cannot; `reason` says which rule applied."""

    hard: int | None
    reason: str


_LATEX_SPACING = re.compile(r"\\left|\\right|\\,|\\;|\\!")
_SPACES = re.compile(r"\s+")
_CACHED_CHARS = 256  # texts up to this long are normalised once (golds and options repeat every row)


def normalise(text: str) -> str:
    """Lower case, no spaces, no outer brackets or trailing punctuation; `(4, 7)` -> `4,7`."""
    return _normalise_short(text) if len(text) <= _CACHED_CHARS else _normalise(text)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    if "\\" in text:
        text = _LATEX_SPACING.sub("", text)
    text = _SPACES.sub("", text)
    text = _unbracket(text.rstrip(".;:!?。"))
    return _NUMBER_WORDS.get(text, text)


_normalise_short = functools.lru_cache(maxsize=4096)(_normalise)


def _unbracket(text: str) -> str:
    """Strip brackets that enclose the whole text, layer by layer: `((4,7))` -> `4,7`, while
    `(1)+(2)` keeps its own. One pass pairs every bracket (per kind), so 16 kB of nested
    parentheses costs no more than 16 kB of letters."""
    if not text or text[0] not in _OPENING:  # nothing encloses it: no pairing pass
        return text
    closing_of = _bracket_pairs(text)
    begin, end = 0, len(text) - 1
    while end - begin >= 1 and closing_of.get(begin) == end:
        begin, end = begin + 1, end - 1
    return text[begin : end + 1]


def _bracket_pairs(text: str) -> dict[int, int]:
    """For each opening bracket that closes, where; each kind counts only its own brackets."""
    pairs: dict[int, int] = {}
    stacks: dict[str, list[int]] = {opening: [] for opening in _BRACKETS[::2]}
    closers = {_BRACKETS[i + 1]: _BRACKETS[i] for i in range(0, len(_BRACKETS), 2)}
    for i, char in enumerate(text):
        if char in stacks:
            stacks[char].append(i)
        elif char in closers and stacks[closers[char]]:
            pairs[stacks[closers[char]].pop()] = i
    return pairs


def _numbers(text: str) -> tuple[Decimal, ...] | None:
    """A normalised answer as a tuple of exact numbers (`4,7` -> (4, 7)), or None if it is not
    one: decimals, so `5.0` equals `5` and 400 ones never equal 400 twos (as floats they did)."""
    if not _TUPLE.match(text):
        return None
    return tuple(Decimal(n) for n in text.split(","))


def judge_blank(answer: str, golds: list[str]) -> Verdict:
    """Compare a blank answer with every accepted gold; right if any matches."""
    said = normalise(answer)
    wrong_reasons = []
    for gold in golds:
        want = normalise(gold)
        if said == want:
            return Verdict(1, f"equals gold {gold!r} after normalising")
        said_n, want_n = _numbers(said), _numbers(want)
        if said_n is not None and want_n is not None and len(said_n) == len(want_n):
            if said_n == want_n:
                return Verdict(1, f"same numbers as gold {gold!r}")
            wrong_reasons.append(f"{answer!r} and gold {gold!r} are different numbers")
    if wrong_reasons and len(wrong_reasons) == len(golds):
        return Verdict(0, "; ".join(wrong_reasons))
    return Verdict(None, f"{answer!r} is not comparable to gold {' | '.join(golds)!r} by rules")


def _label_of(answer: str, choices: Sequence[Choice]) -> tuple[str | None, str]:
    """The label an answer names, or None and why not."""
    labels = {c["label"].upper(): c["label"] for c in choices}
    text = answer.strip()
    match = _LABEL_FORM.match(text)
    if match:
        said = match.group(1).upper()
        if said in labels:
            return labels[said], "label"
        if len(said) == 1 and said.isalpha() and said.isascii():
            return said, "label"  # a letter that is not an option's label is still a label, and wrong
    wanted = normalise(text)
    by_text = [c["label"] for c in choices if normalise(c["text"]) == wanted]
    if len(by_text) == 1:
        return by_text[0], "option text"
    match = _LABEL_WITH_TEXT.match(text)
    if match:
        label = labels.get(match.group(1).upper())
        if label is None:
            return None, f"{match.group(1)!r} before the text is not an option's label"
        after = normalise(match.group(2))
        if normalise(next(c["text"] for c in choices if c["label"] == label)) == after:
            return label, "label and its text"
        if any(normalise(c["text"]) == after for c in choices):
            return None, f"label {label!r} with another option's text"
        return label, "leading label (the text after it is not read)"
    return None, "neither a label nor an option's text"


def judge_choice(answer: str, choices: Sequence[Choice], gold_label: str) -> Verdict:
    label, how = _label_of(answer, choices)
    if label is None:
        return Verdict(None, f"{answer!r}: {how}")
    if label == gold_label:
        return Verdict(1, f"{how} {label} is the gold {gold_label}")
    return Verdict(0, f"{how} {label}, gold is {gold_label}")


def decide(record: RolloutRow, extracted: str | None) -> Verdict:
    """The rules' verdict on one rolled-out record, given its extracted answer."""
    if record.get("error") and extracted is None:
        return Verdict(0, "no answer: the rollout failed")
    if extracted is None:
        return Verdict(0, "no final answer in \\boxed{}")
    if not extracted.strip():
        return Verdict(0, "empty answer")
    if len(extracted) <= _CACHED_CHARS:  # a verdict depends on the answer and the item alone
        choice = record["ans_type"] == "choice"
        try:
            options = tuple(map(_LABEL_AND_TEXT, record["choices"])) if choice else ()
            return _item_verdict(extracted, choice, options, tuple(record["answer"]))
        except TypeError:  # a field that cannot be a key (not bv's shape): judged as it is
            pass
    if record["ans_type"] == "choice":
        return judge_choice(extracted, record["choices"], record["answer"][0])
    return judge_blank(extracted, record["answer"])


_LABEL_AND_TEXT = operator.itemgetter("label", "text")  # an option as its memo key: no Python loop per row


@functools.lru_cache(maxsize=8192)
def _item_verdict(
    answer: str, choice: bool, options: tuple[tuple[str, str], ...], golds: tuple[str, ...]
) -> Verdict:
    """`decide`'s verdict, once per (answer, item): re-scoring and repeats meet the same again."""
    if choice:
        return judge_choice(answer, [{"label": label, "text": text} for label, text in options], golds[0])
    return judge_blank(answer, list(golds))
