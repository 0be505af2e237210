"""The optimizer's reflection prompt: the current skill and a minibatch of judged train rows,
each fenced as data (prompts/reflect.md says never to follow what is inside a fence).

A fence is longer than any run of backticks in what it holds, and control characters are
escaped, so a reply or a question cannot close its fence or smuggle terminal codes; each
trajectory's reply is cut to its last MAX_RESPONSE_CHARS characters (where the answer is)."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from bv.core.records import JudgedRow, choice_lines, gold_text
from bv.core.templates import Templates

MAX_RESPONSE_CHARS = 1500
MAX_FIELD_CHARS = 4000

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_TICKS = re.compile(r"`+")


def as_data(text: str, limit: int = MAX_FIELD_CHARS, tail: bool = False) -> str:
    """Text fit to quote inside a fence: bounded (its head, or its tail) and control characters escaped."""
    if len(text) > limit:
        text = "…" + text[-limit:] if tail else text[:limit] + "…"
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def fenced(text: str) -> str:
    longest = max((len(m.group(0)) for m in _TICKS.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _sections(row: JudgedRow) -> list[tuple[str, str]]:
    """One attempt's lines, each escaped as data, with the part it belongs to: what the target
    was asked, what it answered, and the verdict on it."""
    asked = [
        f"Subtype: {row.get('type', 'unknown')} / {row.get('subtype', 'unknown')}",
        f"Question: {row['question']}",
    ]
    if row.get("ans_type") == "choice":
        asked.append(
            "Choices:\n"
            + choice_lines([{"label": c["label"], "text": c["text"]} for c in row.get("choices", [])])
        )
    return [
        *(("Inputs", as_data(line)) for line in asked),
        ("Feedback", as_data(f"Correct answer: {gold_text(row)}")),
        ("Generated Outputs", as_data(f"Model's final answer: {row.get('extracted') or '(none found)'}")),
        ("Feedback", f"Verdict: {'correct' if row.get('hard') == 1 else 'wrong'}"),
        ("Generated Outputs", "Model's reply (its end):"),
        ("Generated Outputs", as_data(row.get("response") or "", MAX_RESPONSE_CHARS, tail=True)),
    ]


def trajectory(number: int, row: JudgedRow) -> str:
    """One attempt as the optimizer reads it: what it was asked, what it answered, the verdict."""
    body = "\n".join(line for _, line in _sections(row))
    return f"### Attempt {number}\n\n{fenced(body)}"


def attempt_fields(row: JudgedRow) -> dict[str, str]:
    """The same attempt as GEPA's reflective dataset records it (its Inputs, Generated Outputs
    and Feedback), each part in a fence of its own."""
    parts: dict[str, list[str]] = {"Inputs": [], "Generated Outputs": [], "Feedback": []}
    for part, line in _sections(row):
        parts[part].append(line)
    return {part: fenced("\n".join(lines)) for part, lines in parts.items()}


def reflection_prompt(skill: str, rows: Sequence[JudgedRow], max_edits: int, templates: Templates) -> str:
    attempts = "\n\n".join(trajectory(i, row) for i, row in enumerate(rows, 1))
    return templates.render(
        "reflect",
        skill=fenced(as_data(skill, 10 * MAX_FIELD_CHARS)) if skill.strip() else "(empty)",
        trajectories=attempts,
        max_edits=str(max_edits),
    )


def minibatches(
    rows: Sequence[JudgedRow], size: int, success_share: float, seed: str
) -> tuple[list[list[JudgedRow]], int, int]:
    """The rows to reflect on, in minibatches of `size`: every failure, and a share of the
    successes chosen by `seed`; also how many failures and successes were sent. Rows whose
    rollout or judging failed are neither (they say nothing about the skill)."""
    failures = [r for r in rows if r.get("hard") == 0 and not r.get("error")]
    successes = [r for r in rows if r.get("hard") == 1]
    keep = round(success_share * len(successes))
    chosen = sorted(random.Random(seed).sample(range(len(successes)), keep)) if keep else []
    picked: list[JudgedRow] = failures + [successes[i] for i in chosen]
    batches = [list(picked[i : i + size]) for i in range(0, len(picked), size)]
    return batches, len(failures), keep


def count_fields(row: dict[str, Any]) -> dict[str, int]:
    """Requests sent and answered from the cache, and tokens, of one rollout row."""
    turns = row.get("turns") or []
    usage = row.get("usage") or {}
    return {
        "requests": len(turns),
        "cached": sum(1 for t in turns if t.get("cached")),
        "prompt_tokens": int(usage.get("prompt_tokens", 0)),
        "completion_tokens": int(usage.get("completion_tokens", 0)),
    }
