"""A rollout's typed options and the pieces its dry run shares with it: which items a shard
takes, how runs expand, and what the next turn sends after a reply without \\boxed{}."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from bv.core.records import PromptRecord
from bv.core.templates import BV_TEMPLATES, Templates
from bv.engine.backends import Reply
from bv.stages.artifacts import Artifacts
from bv.stages.prompt import refine_text


@dataclass(frozen=True)
class RolloutOptions:
    max_turns: int = 1
    repeats: int = 1
    params: dict[str, Any] = field(default_factory=dict)  # sampling parameters, recorded per row
    shard: tuple[int, int] | None = None  # (k, n): only items whose id hashes to k modulo n
    artifacts: Artifacts | None = None  # writes each row's prompts and conversation under its folder
    templates: Templates = BV_TEMPLATES  # refinement turns render refine.md from here

    @property
    def recorded_templates(self) -> dict[str, str]:
        """The replaced templates this rollout may render: refine.md, when there can be a second turn."""
        return self.templates.recorded("refine") if self.max_turns > 1 else {}


def in_shard(item_id: str, shard: tuple[int, int] | None) -> bool:
    """Whether an item belongs to shard k of n: a stable hash of its id, the same on every machine."""
    if shard is None:
        return True
    k, n = shard
    return int(hashlib.sha256(item_id.encode()).hexdigest(), 16) % n == k


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


def next_turn(
    conversation: list[dict[str, Any]], reply: Reply, options: RolloutOptions
) -> list[dict[str, Any]]:
    """The messages of the next turn after a reply without \\boxed{}: the reply (or, when it
    has no text, a note saying so, never an empty message), then the refinement."""
    text = reply.content if reply.content.strip() else no_text_note(reply)
    return [
        *conversation,
        {"role": "assistant", "content": text},
        {"role": "user", "content": refine_text(text, options.templates)},
    ]
