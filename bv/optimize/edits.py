"""Edit operations on a skill, in the reference's shape, read from an optimizer's reply and checked.

The reply is hostile text: it is parsed within a size bound, and every operation is checked on
its own against the current skill before any is applied. A refused operation costs only itself
and is named with why (`Checked.status`): the history shows it beside the ones that were applied.

    {"edits": [{"op": "append" | "insert_after" | "replace" | "delete",
                "target": "...", "content": "...", "reason": "...", "failure_kind": "..."}]}

(also read under a top-level "patch": {"patch": {"edits": [...]}} or {"patch": [...]}).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bv.core.errors import BVError

OPS = ("append", "insert_after", "replace", "delete")
NEEDS_TARGET = {"insert_after", "replace", "delete"}
NEEDS_CONTENT = {"append", "insert_after", "replace"}
MAX_REPLY_CHARS = 256 * 1024  # an optimizer reply longer than this is not read
MAX_EDITS_READ = 64  # operations read from one reply; the rest are named "over_limit"
MAX_NOTE_CHARS = 500  # a reason or failure kind is kept to this length
MAX_RECORDED = 64  # operations of a step the history records one by one; the rest are tallied
MAX_RECORDED_CHARS = 2000  # of a target or content the history keeps for an operation not applied
DEFAULT_MAX_SKILL_CHARS = 16_000

# Why an operation was not applied (the history's `status`), besides "applied".
STATUSES = {
    "malformed": "not an operation bv can read (unknown op, a missing or non-text field)",
    "absent": "its target is not in the current skill",
    "ambiguous": "its target is in the current skill more than once",
    "leak": "it quotes an item's question with its gold answer, or a held-out item's question"
    " (by itself, or in the skill as the step's edits before it leave it)",
    "too_large": "the skill would exceed the size cap",
    "control_chars": "its text holds control characters",
    "no_change": "it leaves the skill as it was",
    "duplicate": "the same operation as an earlier one (merged into it)",
    "over_step": "beyond the step size (`edits`)",
    "conflict": "an operation applied before it removed its target",
    "over_limit": f"beyond the first {MAX_EDITS_READ} operations of a reply (not read; counted)",
}

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SPACE = re.compile(r"\s+")
_INVISIBLE = re.compile(  # zero-width spaces and joiners, soft hyphens, BOMs, variation selectors
    r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2060-\u2064\ufe00-\ufe0f\ufeff]"
)
# Text that speaks to whoever grades the answer rather than to the model answering (an LLM judge
# reads the reply): flagged, never silently kept (docs/optimize.md).
_TO_GRADER = re.compile(
    r"\bgraders?\b|\bground[ _-]?truth\b"
    r"|\b(?:the|a|an|any|dear|to) (?:judge|evaluator|scorer|grading model|judging model|checker)s?\b"
    r"|\b(?:reply|respond|output|return|say|answer) (?:with |only )?[\"'`*]*(?:true|correct)\b"
    r"|\bmark (?:this|it|the (?:answer|response|reply)) (?:as )?(?:correct|right|true)\b"
    r"|\bignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier) instructions\b"
)


@dataclass(frozen=True)
class Edit:
    op: str
    target: str = ""
    content: str = ""
    reason: str = ""
    failure_kind: str = ""
    support: int = 1  # how many replies (minibatches) proposed it

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        if self.op in NEEDS_TARGET:
            out["target"] = self.target
        if self.op in NEEDS_CONTENT:
            out["content"] = self.content
        for name in ("reason", "failure_kind"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        out["support"] = self.support
        return out


@dataclass(frozen=True)
class Checked:
    """One proposed operation and what became of it."""

    edit: Edit | None  # None when it could not be read at all
    status: str  # "applied", "ok" (passed the checks, not yet applied) or one of STATUSES
    why: str = ""
    raw: str = ""  # a short, escaped quote of what was proposed, for an operation that could not be read
    count: int = 1  # the operations it stands for (`over_limit`: all of a reply's past the first)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status}
        if self.edit is not None:
            out.update(self.edit.to_json())
            if self.status != "applied":  # what was applied is in the skill, whole; the rest cut
                for name in ("target", "content"):
                    if name in out:
                        out[name] = quote(out[name], MAX_RECORDED_CHARS)
        if self.why:
            out["why"] = self.why
        if self.raw:
            out["raw"] = self.raw
        if self.count != 1:
            out["count"] = self.count
        return out


def recorded(checked: Sequence[Checked]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The operations as a history row records them: the applied ones, each reply's one
    `over_limit` entry (its operations past the first MAX_EDITS_READ, counted) and the first
    MAX_RECORDED of the rest one by one, the others tallied by status (issue 34: 2 MB of optimizer
    replies made a 59 MB history row, and every resume read it again). Applied and over_limit
    entries are bounded by the step size and the replies, so each is always there to read."""
    entries: list[dict[str, Any]] = []
    tally: dict[str, int] = {}
    kept = 0  # entries of the other statuses recorded one by one
    for entry in checked:
        if entry.status in ("applied", "over_limit"):
            entries.append(entry.to_json())
        elif kept < MAX_RECORDED:
            kept += 1
            entries.append(entry.to_json())
        else:
            tally[entry.status] = tally.get(entry.status, 0) + entry.count
    return entries, tally


class ReplyProblem(BVError, ValueError):
    """An optimizer reply with no readable edit list: `kind` names it in the history."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def quote(value: Any, limit: int = 200) -> str:
    """A bounded, escaped rendering of hostile text for the history and the report."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=True, default=str)[: limit * 2]
    text = text[:limit] + ("…" if len(text) > limit else "")
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def _json_object(text: str) -> Any:
    """The JSON object of a reply: the whole reply, or the span from its first `{` to its last `}`
    (a reply fenced in ``` or with a sentence around it)."""
    for candidate in (text.strip(), text[text.find("{") : text.rfind("}") + 1] if "{" in text else ""):
        if not candidate:
            continue
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            continue
    raise ReplyProblem("malformed_reply", "the reply holds no JSON object")


def read_reply(text: str | None) -> list[Any]:
    """The raw operations of an optimizer reply; ReplyProblem when there is no edit list to read."""
    if not text or not text.strip():
        raise ReplyProblem("empty_reply", "the reply is empty")
    if len(text) > MAX_REPLY_CHARS:
        raise ReplyProblem("oversized_reply", f"the reply is over {MAX_REPLY_CHARS // 1024} KiB")
    obj = _json_object(text)
    if isinstance(obj, dict) and "edits" not in obj and "patch" in obj:
        obj = obj["patch"]
    if isinstance(obj, dict):
        obj = obj.get("edits")
    if not isinstance(obj, list):
        raise ReplyProblem("malformed_reply", 'the reply has no list of edits ({"edits": [...]})')
    return obj


def parse_edit(raw: Any) -> Edit | str:
    """An Edit from one raw operation, or why it cannot be read."""
    if not isinstance(raw, dict):
        return "an operation is a JSON object"
    op = raw.get("op")
    if op not in OPS:
        return f"op must be one of {', '.join(OPS)}"
    fields: dict[str, str] = {}
    for name in ("target", "content", "reason", "failure_kind"):
        value = raw.get(name, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            return f"{name} must be text"
        fields[name] = value
    if op in NEEDS_TARGET and not fields["target"].strip():
        return f"{op} needs a target"
    if op in ("append", "insert_after") and not fields["content"].strip():
        return f"{op} needs content"
    return Edit(
        op=op,
        target=fields["target"],
        content=fields["content"],
        reason=quote(fields["reason"], MAX_NOTE_CHARS),
        failure_kind=quote(fields["failure_kind"], 60),
    )


def _norm(text: str) -> str:
    """Text as the leak check compares it: NFKC (full-width, ligatures), invisible characters
    (zero-width spaces and joiners, soft hyphens, BOMs) removed, spaces collapsed, case folded."""
    return _SPACE.sub(" ", _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))).strip().casefold()


def grader_phrases(text: str) -> list[str]:
    """The phrases of a skill that address the grader or judge ("Reply True", "ground truth",
    "the judge"…), at most 5, each quoted short; empty when it addresses none."""
    found = dict.fromkeys(m.group(0) for m in _TO_GRADER.finditer(_norm(text)))
    return [quote(phrase, 40) for phrase in list(found)[:5]]


def new_grader_phrases(text: str, before: str) -> list[str]:
    """The phrases addressing the grader that `text` holds and `before` did not: a candidate with
    any is refused untried (a skill that sways the judge would pass every check bv makes with
    it). Those the seed already held are the user's own."""
    if text == before:
        return []
    old = set(grader_phrases(before))
    return [phrase for phrase in grader_phrases(text) if phrase not in old]


@dataclass(frozen=True)
class Guarded:
    """An item text an edit must not carry: its question (normalised), the gold answers, and
    whether the optimizer could have seen it (train) or never (selection, test)."""

    question: str
    golds: tuple[str, ...]
    held_out: bool


def guarded_items(items: Iterable[Mapping[str, Any]], train_ids: set[str]) -> list[Guarded]:
    """What the leak check looks for, from the items of every part."""
    out = []
    for item in items:
        golds = [g for g in item["answer"] if g.strip()]
        for choice in item.get("choices", []):
            if choice["label"] in item["answer"] and len(choice["text"].strip()) > 1:
                golds.append(choice["text"])
        out.append(
            Guarded(_norm(item["question"]), tuple(_norm(g) for g in golds), str(item["id"]) not in train_ids)
        )
    return out


def _quotes(content: str, question: str) -> bool:
    return bool(question) and (question in content or (len(question) > 60 and question[:60] in content))


def _golds_in(content: str, golds: Sequence[str]) -> bool:
    for gold in golds:
        if len(gold) <= 2:  # a label or a digit: a word of its own
            if re.search(rf"(?<![\w]){re.escape(gold)}(?![\w])", content):
                return True
        elif gold in content:
            return True
    return False


def leaks(content: str, guarded: Sequence[Guarded]) -> dict[int, str]:
    """The items `content` leaks (their index in `guarded`) and why. A question shared by train
    and held-out items (the templated ones) counts as a train question."""
    text = _norm(content)
    train_questions = {g.question for g in guarded if not g.held_out}
    found: dict[int, str] = {}
    for index, g in enumerate(guarded):
        if not _quotes(text, g.question):
            continue
        if _golds_in(text, g.golds):
            found[index] = "it quotes an item's question with its gold answer"
        elif g.held_out and g.question not in train_questions:
            found[index] = (
                "it quotes the question of a held-out item (selection or test), which the optimizer never saw"
            )
    return found


def leak(content: str, guarded: Sequence[Guarded], already: Iterable[int] = ()) -> str | None:
    """Why `content` leaks an item, or None; `already`: items the text it came from leaked
    (the seed's own doing), not counted again. The one check of an edit's content, of the whole
    skill after each edit is applied (`propose`) and of a skill GEPA rewrote (`skill_problem`)."""
    known = set(already)
    return next((why for index, why in leaks(content, guarded).items() if index not in known), None)


def apply_edit(text: str, edit: Edit) -> str:
    """The skill after one operation (checked first: its target is there exactly once)."""
    if edit.op == "append":
        return (text.rstrip() + "\n\n" if text.strip() else "") + edit.content.strip()
    at = text.find(edit.target)
    end = at + len(edit.target)
    if edit.op == "insert_after":
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end
        return text[:line_end] + "\n" + edit.content.strip("\n") + text[line_end:]
    if edit.op == "replace":
        return text[:at] + edit.content + text[end:]
    joined = text[:at] + text[end:]
    return re.sub(r"\n{3,}", "\n\n", joined).strip("\n")


def check_edit(text: str, edit: Edit, guarded: Sequence[Guarded], max_chars: int) -> Checked:
    """Whether `edit` applies to `text` and may be applied; status "ok" when it may."""
    for name in ("target", "content"):
        if _CONTROL.search(getattr(edit, name)):
            return Checked(edit, "control_chars", f"its {name} holds control characters")
    if len(edit.content) > max_chars:
        return Checked(edit, "too_large", f"its content is over the skill cap of {max_chars} characters")
    if edit.op in NEEDS_TARGET:
        count = text.count(edit.target)
        if count == 0:
            return Checked(edit, "absent", "its target is not in the current skill")
        if count > 1:
            return Checked(edit, "ambiguous", f"its target is in the current skill {count} times")
    if edit.op in NEEDS_CONTENT:
        why = leak(edit.content, guarded)
        if why:
            return Checked(edit, "leak", why)
    after = apply_edit(text, edit)
    if len(after) > max_chars:
        return Checked(
            edit, "too_large", f"the skill would be {len(after)} characters, over the cap of {max_chars}"
        )
    if after == text:
        return Checked(edit, "no_change", "it leaves the skill as it was")
    return Checked(edit, "ok")


def skill_problem(
    text: str, guarded: Sequence[Guarded], max_chars: int, already: Iterable[int] = ()
) -> tuple[str, str] | None:
    """Why a whole new skill text (one GEPA rewrote, not an edit) may not be tried, as
    (status, why) with the statuses of STATUSES (and "empty"), or None when it may; `already`
    as `leak` takes it."""
    if not text.strip():
        return "empty", "the new skill is empty"
    if _CONTROL.search(text):
        return "control_chars", "its text holds control characters"
    if len(text) > max_chars:
        return "too_large", f"the skill is {len(text)} characters, over the cap of {max_chars}"
    why = leak(text, guarded, already)
    return ("leak", why) if why else None


def _key(edit: Edit) -> tuple[str, str, str]:
    return edit.op, _norm(edit.target), _norm(edit.content)


def propose(
    text: str, raw_ops: Sequence[Sequence[Any]], guarded: Sequence[Guarded], max_chars: int, step_size: int
) -> tuple[str, list[Checked]]:
    """The candidate skill from the operations of several replies, and what became of each.

    Each operation is read and checked against the current skill; duplicates merge into the
    first (its `support` counting them); the most supported (then the first proposed) up to
    `step_size` are applied in that order, each checked again on the text it meets."""
    checked: list[Checked] = []
    merged: dict[tuple[str, str, str], int] = {}  # key -> index in `checked`
    for ops in raw_ops:
        for raw in ops[:MAX_EDITS_READ]:
            edit = parse_edit(raw)
            if isinstance(edit, str):
                checked.append(Checked(None, "malformed", edit, quote(raw)))
                continue
            key = _key(edit)
            if key in merged:
                first = checked[merged[key]]
                assert first.edit is not None
                checked[merged[key]] = replace(
                    first, edit=replace(first.edit, support=first.edit.support + 1)
                )
                checked.append(Checked(edit, "duplicate", STATUSES["duplicate"]))
                continue
            merged[key] = len(checked)
            checked.append(check_edit(text, edit, guarded, max_chars))
        if len(ops) > MAX_EDITS_READ:  # one entry for the rest, however many: the record stays small
            more = len(ops) - MAX_EDITS_READ
            tally = f"{more} operations {STATUSES['over_limit']}"
            checked.append(Checked(None, "over_limit", tally, count=more))
    passing = [i for i, c in enumerate(checked) if c.status == "ok"]
    ranked = sorted(passing, key=lambda i: -checked[i].edit.support)  # type: ignore[union-attr]
    candidate, applied = text, 0
    already = leaks(text, guarded) if passing else {}  # what the current skill carries already
    for index in ranked:
        entry = checked[index]
        assert entry.edit is not None
        if applied >= step_size:
            checked[index] = Checked(entry.edit, "over_step", STATUSES["over_step"])
            continue
        again = check_edit(candidate, entry.edit, guarded, max_chars)
        if again.status != "ok":
            status = "conflict" if again.status in ("absent", "ambiguous") else again.status
            checked[index] = Checked(entry.edit, status, again.why)
            continue
        after = apply_edit(candidate, entry.edit)
        why = leak(after, guarded, already)  # the whole skill: a question in one edit, its answer in another
        if why:
            checked[index] = Checked(entry.edit, "leak", f"with the edits before it, {why}")
            continue
        candidate, applied = after, applied + 1
        checked[index] = Checked(entry.edit, "applied")
    return candidate, checked
