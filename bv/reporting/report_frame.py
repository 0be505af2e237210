"""A report's rows as a table of plain columns (bv.api.Report.records, to_pandas): one row per
(input, id, run), the verdict as `correct`, so a notebook reads them without knowing bv's row
format (docs/api.md lists the columns)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# The columns, in order, and what each holds (docs/api.md's table; tests/reporting/
# test_report_frame.py holds the two equal).
COLUMNS: dict[str, str] = {
    "name": "the report input the row belongs to (a run's label, a skill's name)",
    "id": "the item's id",
    "run": "which repeat of the item (0 to repeats - 1)",
    "type": "the item's type",
    "subtype": "the item's subtype",
    "correct": "True or False; None when the row was not decided (a failed request, a judge error)",
    "expected": "the item's accepted answers, joined by ' | '",
    "extracted": "the answer bv read from the reply",
    "error": "why the row's requests failed (None when they did not)",
    "decided_by": "rules, llm, error (a judge error), rollout_error (not judged) or imported",
    "model": "the model that answered",
    "skill": "the skill in the system prompt, as name@sha256 (its first 8 hex digits); None for none",
    "judge_model": "the LLM judge that decided (None: the rules)",
    "prompt_tokens": "the row's prompt tokens, every turn",
    "completion_tokens": "the row's completion tokens, every turn",
    "latency_s": "seconds the row's requests took",
    "cost_usd": "what the row's replies cost (None: not priced)",
    "judge_cost_usd": "what the LLM judge's reply cost (None: no LLM asked, or not priced)",
}


def _skill(row: Mapping[str, Any]) -> str | None:
    skill = row.get("skill")
    if isinstance(skill, Mapping):
        return f"{skill.get('name')}@{str(skill.get('sha256'))[:8]}"
    return None


def frame_records(inputs: Iterable[tuple[str, Iterable[Mapping[str, Any]]]]) -> list[dict[str, Any]]:
    """One record of COLUMNS per judged row of each named input."""
    out: list[dict[str, Any]] = []
    for name, rows in inputs:
        for row in rows:
            hard = row.get("hard")
            given = row.get("usage")
            usage: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
            answers = row.get("answer")
            out.append(
                {
                    "name": name,
                    "id": row.get("id"),
                    "run": row.get("run"),
                    "type": row.get("type"),
                    "subtype": row.get("subtype"),
                    "correct": None if hard is None else hard == 1,
                    "expected": " | ".join(map(str, answers)) if isinstance(answers, list) else answers,
                    "extracted": row.get("extracted"),
                    "error": row.get("error"),
                    "decided_by": row.get("decided_by"),
                    "model": row.get("model"),
                    "skill": _skill(row),
                    "judge_model": row.get("judge_model"),
                    "prompt_tokens": usage.get("prompt_tokens"),
                    "completion_tokens": usage.get("completion_tokens"),
                    "latency_s": row.get("latency_s"),
                    "cost_usd": row.get("cost_usd"),
                    "judge_cost_usd": row.get("judge_cost_usd"),
                }
            )
    return out


def to_pandas(records: list[dict[str, Any]], who: str) -> Any:
    """The records as a pandas DataFrame of COLUMNS; pandas is imported only here, and
    MissingPackage says to install it when it is not."""
    import importlib

    from bv.core.errors import MissingPackage

    try:
        pandas = importlib.import_module("pandas")  # optional: not a dependency of bv
    except ImportError:
        raise MissingPackage(f"{who}.to_pandas needs pandas: pip install pandas") from None
    return pandas.DataFrame.from_records(records, columns=list(COLUMNS))
