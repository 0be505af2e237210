"""Record schemas: the one place that says which fields each stage reads and writes.

Every stage reads JSONL records and writes them back with its own fields added, so any
stage can be re-run later on a file. A record is a flat JSON object (easy to `jq`). Each
stage's fields are a TypedDict below (`Item`, `PromptFields`, `RolloutFields`, `JudgeFields`),
and a stage's whole record is the TypedDict of everything before it plus its own
(`PromptRecord`, `RolloutRow`, `JudgedRow`): the writers build their fields as those types and
the readers index them, so the type checker (tests/project/test_lint.py) refuses a misspelt key. The
field lists (`PROMPT_FIELDS`, …) are derived from them, and docs/formats.md lists exactly
those (tests/core/test_records.py). Re-running a stage first drops the fields of that stage and of
every later one, so a re-judged row keeps its rollout untouched.
"""

# No `from __future__ import annotations` here: under Python 3.11 it hides NotRequired from the
# TypedDicts at run time (every key would be listed in __required_keys__).

import re
import string
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict, TypeVar, cast

from bv.core.errors import BadRecord

SCHEMA_VERSION = 1


class Choice(TypedDict):
    label: str
    text: str


class Item(TypedDict):
    """An item, normalised (bv prompt reads it; bv import writes it)."""

    id: str
    question: str
    ans_type: str  # one of ANS_TYPES
    choices: list[Choice]  # empty for blank items
    answer: list[str]  # accepted answers; for choice items, one label
    type: str
    subtype: str
    images: list[str]  # paths as written in the items file
    cot: NotRequired[str]


class SkillRef(TypedDict):
    name: str
    sha256: str


class PromptFields(TypedDict):
    """What bv prompt adds. `templates`, `rollout_templates`, `judge_templates`: the templates
    each stage rendered from a user's replacement (`--prompts DIR`), by name with their SHA-256."""

    schema: int
    messages: list[dict[str, Any]]  # OpenAI chat messages; images by file:// URL
    skill: SkillRef | None
    style: NotRequired[str]  # "official" with --style official
    templates: NotRequired[dict[str, str]]


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: NotRequired[int]  # when some turn's server said
    cached_tokens: NotRequired[int]


class ReplyFields(TypedDict):
    """One model reply as recorded (bv.engine.backends.Reply.to_json) and stored in the cache;
    the NotRequired fields only when the endpoint sent them."""

    content: str
    finish_reason: str | None
    usage: dict[str, int]
    latency_s: float
    model: str | None  # as the server named it
    reasoning: NotRequired[str]  # reasoning_content / reasoning / reasoning_details / <think>
    reasoning_details: NotRequired[list[dict[str, Any]]]
    refusal: NotRequired[str]
    content_filter: NotRequired[str]
    batch: NotRequired[bool]  # True: the reply came from a Batch API job, and is priced at batch rates
    batch_conflicts: NotRequired[int]  # the batch's other, different result lines for it (the first was used)
    image_opened: NotRequired[bool]  # exec: whether the agent's transcript shows it opening the image
    endpoint: NotRequired[str]  # the endpoint that made it: stored with it in the cache, and in a cached turn


class Turn(ReplyFields):
    """One turn of a rollout row: the reply, and whether it came from the cache."""

    cached: bool


class RolloutFields(TypedDict):
    """What bv rollout adds."""

    run: int
    backend: str
    model: str
    params: dict[str, Any]
    response: str | None  # None when the row failed
    turns: list[Turn]
    usage: Usage
    latency_s: float
    error: str | None
    refusal: str | None  # the final reply's refusal text
    content_filter: str | None  # what a content filter stopped (the reply, or the request's prompt)
    cut_off: bool  # the final reply hit the token limit (finish_reason length) with no answer
    bv_version: str  # provenance: the bv, the endpoint (never a secret) and the UTC start of the row
    endpoint: str  # where the final reply came from: for one from the cache, the endpoint that made it
    cached: bool  # the final reply came from the reply cache
    started_at: str
    cost_usd: float | None  # what the row's replies cost, cached ones too (None: unknown, or not priced)
    price_source: str | None  # where that price came from, or why it is unknown (None: no prices)
    shard: NotRequired[str]  # "K/N" with --shard: which shard of the items the row belongs to
    rollout_templates: NotRequired[dict[str, str]]


class PanelVerdict(TypedDict):
    """One judge's verdict on a row, when a panel of LLM judges decided it (`judge_panel`)."""

    model: str
    hard: int | None  # 1 right, 0 wrong, None: this judge's error
    reply: str | None
    error: str | None
    cost_usd: float | None
    price_source: str | None
    usage: NotRequired[dict[str, int]]


class JudgeFields(TypedDict):
    """What bv judge adds."""

    extracted: str | None
    hard: int | None  # 1 right, 0 wrong, None for a judge error
    decided_by: str  # rules, llm, error (a judge error), rollout_error (not judged), imported
    undecided: bool
    judge_reason: str
    judge_model: str | None
    judge_params: dict[str, Any] | None  # the LLM judge's request fields as sent (None: no LLM asked)
    judge_reply: str | None
    judge_error: str | None
    judge_cost_usd: float | None  # what the LLM judge's reply cost (None: no LLM asked, unknown, not priced)
    judge_price_source: str | None  # where that price came from, or why unknown (None: not priced)
    reasoning_answer: str | None  # the answer the reasoning boxes when the content has none
    judge_version: str
    judge_templates: NotRequired[dict[str, str]]
    judge_usage: NotRequired[dict[str, int]]  # the LLM judge's reply's token counts, when it answered
    judge_batch: NotRequired[bool]  # True: the LLM judge's reply came from a Batch API job
    judge_panel: NotRequired[list[PanelVerdict]]  # each judge's verdict, when a panel decided
    judge_panel_rule: NotRequired[str]  # how the panel's verdicts made `hard`: majority, unanimous, any
    judge_calibration: NotRequired[PanelVerdict]  # the LLM judge's verdict on a row the rules decided


class PromptRecord(Item, PromptFields):
    """A record of bv prompt (what bv rollout reads)."""


class RolloutRow(PromptRecord, RolloutFields):
    """A row of bv rollout (what bv judge reads)."""


class JudgedRow(RolloutRow, JudgeFields):
    """A row of bv judge (what bv report reads)."""


ITEM_FIELDS = tuple(Item.__annotations__)
PROMPT_FIELDS = tuple(PromptFields.__annotations__)
ROLLOUT_FIELDS = tuple(RolloutFields.__annotations__)
JUDGE_FIELDS = tuple(JudgeFields.__annotations__)
STAGE_FIELDS = {"prompt": PROMPT_FIELDS, "rollout": ROLLOUT_FIELDS, "judge": JUDGE_FIELDS}
STAGES = tuple(STAGE_FIELDS)

ANS_TYPES = ("choice", "blank")
LABELS = string.ascii_uppercase


# The fields each stage and every later one wrote: what re-running that stage drops.
_DROPPED = {
    stage: frozenset(f for later in STAGES[index:] for f in STAGE_FIELDS[later])
    for index, stage in enumerate(STAGES)
}


def without_stage(record: Mapping[str, Any], stage: str) -> dict[str, Any]:
    """The record minus the fields `stage` and every later stage wrote (for re-running a stage)."""
    drop = _DROPPED[stage]
    if drop.isdisjoint(record):  # the common case (a first judging): a plain copy is 5x faster
        return dict(record)
    return {k: v for k, v in record.items() if k not in drop}


_Record = TypeVar("_Record", bound=Mapping[str, Any])


def drop_stage(record: _Record, stage: str) -> _Record:
    """`without_stage` in place, for a record its caller gives up: no copy (re-scoring's rows,
    docs/performance.md); fields written after the rest land where they would in the copy."""
    drop, fields = _DROPPED[stage], cast(dict[str, Any], record)
    if not drop.isdisjoint(fields):
        for name in [name for name in fields if name in drop]:
            del fields[name]
    return record


def check_schema(record: dict[str, Any]) -> None:
    """Refuse records written by a newer bv, whose fields this version may misread."""
    version = record.get("schema", SCHEMA_VERSION)
    if version != SCHEMA_VERSION and (not isinstance(version, int) or version > SCHEMA_VERSION):
        raise BadRecord(f"schema version {version!r} is newer than this bv understands ({SCHEMA_VERSION})")


def choice_lines(choices: Sequence[Choice]) -> str:
    """Choices as `A. text` lines: how the model and the judge see them (the chance baseline reads
    them back with CHOICE_LINE)."""
    return "\n".join(f"{c['label']}. {c['text']}" for c in choices)


CHOICE_LINE = re.compile(r"^(\S+)\. ", re.MULTILINE)


def official_choice_lines(choices: Sequence[Choice]) -> str:
    """Choices as `(A) text` lines, as the paper's evaluation writes them (`--style official`;
    read back with OFFICIAL_CHOICE_LINE)."""
    return "\n".join(f"({c['label']}) {c['text']}" for c in choices)


OFFICIAL_CHOICE_LINE = re.compile(r"^\(([^\s)]+)\) ", re.MULTILINE)


def message_text(content: Any, image_marks: bool = False) -> str:
    """The text of a chat message's content (a string, or a list of parts, joined by blank
    lines); with `image_marks`, each image part as `[image: URL]`."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        elif image_marks and part.get("type") == "image_url":
            parts.append(f"[image: {(part.get('image_url') or {}).get('url', '')}]")
    return "\n\n".join(parts)


def gold_text(record: Mapping[str, Any]) -> str:
    """The gold answer as a person reads it: `B. red circle` for choice items, `a | b` for blank."""
    if record.get("ans_type") == "choice":
        label = record["answer"][0]
        text = next((c["text"] for c in record.get("choices", []) if c["label"] == label), "")
        return f"{label}. {text}" if text else label
    return " | ".join(record.get("answer", []))


_WRITTEN_BY = {"prompt": "bv prompt", "rollout": "bv rollout", "judged": "bv judge"}


def require(record: dict[str, Any], stage: str, *fields: str) -> None:
    """Raise BadRecord unless the record has what a stage needs: a `stage` record (written by
    the stage before, e.g. judge reads rollout records), with `fields`."""
    missing = [f for f in fields if f not in record]
    if missing:
        raise BadRecord(
            f"not a {stage} record: missing {', '.join(repr(f) for f in missing)}"
            f" (is this the output of {_WRITTEN_BY.get(stage, stage)}?)"
        )


def row_key(record: Mapping[str, Any]) -> tuple[str, int]:
    """(id, run): what makes a row unique. `run` is 0 when absent; anything but a
    non-negative integer is refused."""
    if "id" not in record:
        raise BadRecord("missing 'id'")
    run = record.get("run", 0)
    if run.__class__ is not int and (isinstance(run, bool) or not isinstance(run, int)):
        raise BadRecord(f"'run' must be an integer, not {run!r}")
    if run < 0:  # runs count from 0: a negative one is no run bv or the official scripts write
        raise BadRecord(f"'run' must be a non-negative integer, not {run}")
    if not -(2**63) <= run < 2**63:  # the fast reader (bv.core.jsonl) leaves such a number to this check
        from bv.core.json_values import TOO_LARGE

        raise BadRecord(TOO_LARGE)
    item = record["id"]
    return item if item.__class__ is str else str(item), run


def natural_key(text: str) -> list[tuple[int, int, str, str]]:
    """Sort key that puts item 2 before item 10: runs of ASCII digits compare as numbers, by
    their length without leading zeros and then digit by digit (never through `int`, which
    refuses 4,300 digits), `0445` just after `445`; other text compares as text."""
    key = []
    for part in re.split(r"([0-9]+)", text):
        if part.isascii() and part.isdecimal():
            digits = part.lstrip("0") or "0"
            key.append((0, len(digits), digits, part))
        elif part:
            key.append((1, 0, part, ""))
    return key


def check_row(record: dict[str, Any]) -> dict[str, Any]:
    """What bv merge reads: any row with an id and an integer run."""
    check_schema(record)
    row_key(record)
    return record


def _check_item_fields(record: dict[str, Any], stage: str) -> None:
    """The item fields later stages rely on, with their types (a prompt record may be hand-made).
    Written as plain loops: bv judge runs this on every row."""
    if not ("id" in record and "question" in record and "ans_type" in record and "answer" in record):
        require(record, stage, "id", "question", "ans_type", "answer")
    if not isinstance(record["question"], str):
        raise BadRecord("'question' must be a string")
    ans_type = record["ans_type"]
    if ans_type not in ANS_TYPES:
        raise BadRecord(f"unknown answer type {ans_type!r}")
    answer = record["answer"]
    if not isinstance(answer, list) or not answer or not _all_str(answer):
        raise BadRecord("'answer' must be a non-empty list of accepted answers (strings)")
    if ans_type == "choice":
        choices = record.get("choices")
        if not isinstance(choices, list) or not choices or not _all_choices(choices):
            raise BadRecord("'choices' must be a non-empty list of {'label': ..., 'text': ...}")
    _check_group_fields(record, ("type", "subtype"))


def _all_str(values: list[Any]) -> bool:
    for value in values:
        if not isinstance(value, str):
            return False
    return True


def _all_choices(choices: list[Any]) -> bool:
    for c in choices:
        if not (isinstance(c, dict) and isinstance(c.get("label"), str) and isinstance(c.get("text"), str)):
            return False
    return True


def _check_group_fields(record: dict[str, Any], names: tuple[str, ...]) -> None:
    """`type`, `subtype` (and `ans_type` for a judged row): a string when present."""
    get = record.get
    for name in names:
        value = get(name)
        if value is not None and not isinstance(value, str):
            raise BadRecord(f"'{name}' must be a string")


def check_prompt_record(record: dict[str, Any]) -> PromptRecord:
    """What bv rollout reads: a record of bv prompt."""
    check_schema(record)
    require(record, "prompt", "id", "messages")
    messages = record["messages"]
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise BadRecord("'messages' must be a non-empty list of chat messages")
    row_key(record)
    return cast(PromptRecord, record)


def check_rollout_record(record: dict[str, Any]) -> RolloutRow:
    """What bv judge reads: a row of bv rollout (or bv import)."""
    check_schema(record)
    require(record, "rollout", "response")
    _check_item_fields(record, "rollout")
    if record["response"] is not None and not isinstance(record["response"], str):
        raise BadRecord("'response' must be a string or null")
    row_key(record)
    return cast(RolloutRow, record)


def check_judged_row(record: dict[str, Any]) -> JudgedRow:
    """What bv report reads: a row of bv judge (or bv import)."""
    judged_key(record)
    return cast(JudgedRow, record)


def judged_key(record: dict[str, Any]) -> tuple[str, int]:
    """The (id, run) of a judged row, once it is checked as `check_judged_row` does (bv report
    needs both, for every row)."""
    check_schema(record)
    if not ("id" in record and "hard" in record):
        require(record, "judged", "id", "hard")
    hard = record["hard"]
    if hard not in (0, 1, None) or isinstance(hard, bool):
        raise BadRecord(f"'hard' must be 1, 0 or null, not {hard!r}")
    _check_group_fields(record, ("type", "subtype", "ans_type"))
    return row_key(record)
