"""What a rollout sends, shared by the rollout, its dry run and the replay: each record once per
run, and after a reply without \\boxed{} the next turn (or none, after a refusal)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from bv.core.records import PromptRecord
from bv.core.templates import Templates
from bv.engine.backends import Reply
from bv.stages.prompt import refine_text


def expand_runs(records: Iterable[PromptRecord], repeats: int) -> Iterator[tuple[PromptRecord, int]]:
    """Each record once per run, lazily: (record, run)."""
    for record in records:
        for run in range(repeats):
            yield record, run


def refusal_or_filtered(reply: Reply) -> bool:
    """Whether a reply ends its row's turns although it has no \\boxed{}: a refusal, or a
    content filter's stop (asking again would not refine an answer, it would re-ask a refusal)."""
    return reply.refusal is not None or reply.content_filter is not None


def no_text_note(reply: Reply) -> str:
    """What the conversation says for a reply without text (content null or empty): an empty
    assistant message is refused by some endpoints (Anthropic's), and a missing one breaks the
    alternation of roles that some chat templates require (Gemma's)."""
    if reply.finish_reason == "length":
        return "[no reply text: cut off at the token limit]"
    return "[no reply text]"


def next_turn(conversation: list[dict[str, Any]], reply: Reply, templates: Templates) -> list[dict[str, Any]]:
    """The messages of the next turn after a reply without \\boxed{}: the reply (or, when it
    has no text, a note saying so, never an empty message), then the refinement."""
    text = reply.content if reply.content.strip() else no_text_note(reply)
    return [
        *conversation,
        {"role": "assistant", "content": text},
        {"role": "user", "content": refine_text(text, templates)},
    ]
