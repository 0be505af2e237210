"""What every `bv import` of another tool's results shares: the judged row it makes, and the
version of the mappings, so a row says which mapping read it.

`MAPPING_VERSION` grows when a mapping from lmms-eval or VLMEvalKit changes what a row holds
(docs/formats.md, "Importing other tools' results"); each imported row carries it in `imported`.
"""

from __future__ import annotations

import json
from typing import Any

from bv.core.errors import BadRecord
from bv.core.items import id_text

MAPPING_VERSION = 1
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def base_item(
    item_id: Any, key: str, gold: str, kind: str, options: list[str], kind_of: str, sub: str
) -> dict[str, Any]:
    """bv's item fields from another tool's: `kind` is `choice` or `blank`; a choice item's gold is
    its label and its `options` are labelled A, B, C… in order, as the official meta_data.jsonl."""
    if kind not in ("choice", "blank"):
        raise BadRecord(f"unknown answer type {kind!r} (choice or blank)")
    if not gold.strip():
        raise BadRecord("the ground truth is empty")
    if kind == "choice" and not options:
        raise BadRecord("a choice item without its options")
    if kind == "choice" and gold not in LABELS[: len(options)]:
        raise BadRecord(f"choice answer {gold!r} is not the label of one of the {len(options)} options")
    return {
        "id": id_text(item_id, key),
        "ans_type": kind,
        "choices": [{"label": LABELS[n], "text": str(text)} for n, text in enumerate(options)],
        "answer": [gold],
        "type": kind_of or "unknown",
        "subtype": sub or "unknown",
    }


def options_list(value: Any) -> list[str]:
    """A choice item's options: a list, or the JSON text of one (VLMEvalKit's `options` column)."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise BadRecord(f"'options' is not a JSON list: {value[:80]!r}") from None
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise BadRecord("'options' must be a list of texts")
    if len(value) > len(LABELS):
        raise BadRecord(f"'options' has {len(value)} entries; at most {len(LABELS)} can be labelled")
    return [str(v) for v in value]


def judged_row(
    base: dict[str, Any],
    *,
    question: str,
    run: int,
    model: str | None,
    response: str,
    extracted: str | None,
    hard: int | None,
    reason: str,
    judge_version: str,
    judge_model: str | None = None,
    judge_reply: str | None = None,
    judge_error: str | None = None,
) -> dict[str, Any]:
    """A judged bv row keeping another tool's verdict (`decided_by: imported`); `hard` None is that
    tool's judge failing (`decided_by: error`, counted as a judge error)."""
    return {
        **base,
        "question": question,
        "run": run,
        "backend": "imported",
        "model": model,
        "response": response,
        "error": None,
        "extracted": extracted,
        "hard": hard,
        "decided_by": "imported" if hard is not None else "error",
        "undecided": False,
        "judge_reason": reason,
        "judge_model": judge_model,
        "judge_params": None,
        "judge_reply": judge_reply,
        "judge_error": judge_error,
        "judge_version": judge_version,
    }
