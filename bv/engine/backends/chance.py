"""The chance baseline: a seeded uniform guess among the options, offline and free.

For choice items it boxes one of the labels listed in the prompt; for blank items it boxes
nothing, which is wrong. Its expected accuracy is the chance level `bv report` shows, so a
model's score can be read against it. The guess depends only on the seed, the messages
and the run, so it is the same whatever the order or concurrency.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from bv.core.images import map_image_urls
from bv.core.records import CHOICE_LINE, OFFICIAL_CHOICE_LINE, message_text
from bv.engine.backends import BackendBase, Reply


def _user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the first user message: the question as bv prompt wrote it."""
    return next((message_text(m.get("content")) for m in messages if m.get("role") == "user"), "")


# The choices block of each prompt style: its heading and its option lines
# (prompts/choices.md and prompts/official_choices.md).
_CHOICE_BLOCKS = (("## Choices", CHOICE_LINE), ("Choices:\n", OFFICIAL_CHOICE_LINE))


def _labels(messages: list[dict[str, Any]]) -> list[str]:
    """The option labels, read back from the choices block of the question."""
    text = _user_text(messages)
    for heading, line in _CHOICE_BLOCKS:
        if heading in text:
            block = text.split(heading, 1)[1].strip().split("\n\n", 1)[0]
            return line.findall(block)
    return []


class ChanceBackend(BackendBase):
    name = "chance"
    settings = ()
    cacheable = False

    def __init__(self, seed: int = 0) -> None:
        self.model = "chance"
        self.seed = seed

    @classmethod
    def config_from(cls, rollout: Any) -> dict[str, Any]:
        return {"seed": rollout.request.seed}

    @classmethod
    def from_config(cls, seed: int | None = None) -> ChanceBackend:
        return cls(seed=seed or 0)

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Reply:
        labels = _labels(messages)
        if not labels:
            return Reply(
                content="A blank question; the chance baseline does not guess. \\boxed{}",
                finish_reason="stop",
                model=self.model,
            )
        # Seeded by the whole request (images by file name), so items that share a question
        # wording still get independent guesses, and the guess does not depend on where the data is.
        request = map_image_urls(messages, lambda path: path.name)
        blob = json.dumps([self.seed, params.get("run", 0), request], sort_keys=True)
        rng = random.Random(hashlib.sha256(blob.encode()).digest())
        return Reply(
            content=f"Guessing uniformly among {len(labels)} options. \\boxed{{{rng.choice(labels)}}}",
            finish_reason="stop",
            model=self.model,
        )
