"""`bv import` of lmms-eval's BabyVision sample logs (`<date>_samples_babyvision.jsonl`).

lmms-eval (github.com/EvolvingLMMs-Lab/lmms-eval) writes, with `--log_samples`, one JSON line per
document: `doc_id`, `target`, `input` (the prompt's text), `filtered_resps` (the reply), and its
task's per-sample result under the metric's name. Its `babyvision` task's is
`babyvision_overall_accuracy`: `task_type`, `subtype`, `correct` (its LLM judge's verdict),
`parsed_pred`, `groundtruth`, or `error` when the judge failed. Each line becomes a judged bv row
with that verdict kept; docs/formats.md lists the mapping.
"""

from __future__ import annotations

from typing import Any

from bv.core.errors import BadRecord
from bv.data.imported import LABELS, MAPPING_VERSION, base_item, judged_row

METRIC = "babyvision_overall_accuracy"
# The instruction babyvision.yaml's `post_prompt` ends the prompt with; dropped from the question.
POST_PROMPT = "\nThink about the question and give your final answer in \\boxed{Answer} format."
FORMAT = "lmms-eval samples"


def is_sample(record: dict[str, Any]) -> bool:
    """An lmms-eval sample line (any task): it has `doc_id` and the reply."""
    return "doc_id" in record and ("filtered_resps" in record or "resps" in record)


def _reply(record: dict[str, Any]) -> str:
    """The one reply a sample holds: lmms-eval unwraps a single reply to a string."""
    value = record.get("filtered_resps", record.get("resps"))
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, list):
        raise BadRecord(f"'filtered_resps' holds {len(value)} replies; bv imports one reply per sample")
    if not isinstance(value, str):
        raise BadRecord(f"'filtered_resps' must be the reply's text, not {type(value).__name__}")
    return value


def _text(result: dict[str, Any], key: str) -> str:
    value = result.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise BadRecord(f"{METRIC}.{key} must be a text, not {type(value).__name__}")
    return str(value)


def _question(prompt: str) -> str:
    """The question in lmms-eval's prompt: before its choices and its default answer instruction."""
    return prompt.split("\nChoices:\n", 1)[0].removesuffix(POST_PROMPT)


def sample_row(record: dict[str, Any], run: int, model: str | None) -> dict[str, Any]:
    """One lmms-eval BabyVision sample as a judged bv row, its `correct` kept as `hard`."""
    result = record.get(METRIC)
    if not isinstance(result, dict):
        others = [k for k, v in record.items() if isinstance(v, dict)]
        found = f" (its results: {', '.join(others)})" if others else ""
        raise BadRecord(f"no {METRIC!r}: not a sample of lmms-eval's babyvision task{found}")
    gold = _text(result, "groundtruth") or _text(record, "target")
    error = result.get("error")
    correct = result.get("correct")
    if error is None and not isinstance(correct, bool):
        raise BadRecord(f"{METRIC}.correct must be true or false, not {correct!r}")
    kind = "choice" if "\nChoices:\n" in _text(record, "input") else "blank"
    options = []
    if kind == "choice":  # the prompt lists them as "(A) text" lines
        lines = _text(record, "input").split("\nChoices:\n", 1)[-1].splitlines()
        options = [
            ln[4:] for ln in lines if len(ln) > 3 and ln[0] == "(" and ln[1] in LABELS and ln[2] == ")"
        ]
    base = base_item(
        record["doc_id"], "doc_id", gold, kind, options, _text(result, "task_type"), _text(result, "subtype")
    )
    parsed = _text(result, "parsed_pred") if "parsed_pred" in result else None
    hard = None if error is not None else int(correct)  # type: ignore[arg-type]
    row = judged_row(
        base,
        question=_question(_text(record, "input")),
        run=run,
        model=model,
        response=_reply(record),
        extracted=parsed,
        hard=hard,
        reason="lmms-eval's correct" if hard is not None else "lmms-eval's judge failed",
        judge_version="lmms-eval",
        judge_error=None if error is None else f"lmms-eval: {error}",
    )
    row["imported"] = {
        "format": FORMAT,
        "mapping": MAPPING_VERSION,
        "doc_id": record["doc_id"],
        "correct": correct if error is None else None,
        "parsed_pred": parsed,
        "ground_truth": gold,
    }
    return row
