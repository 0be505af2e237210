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
import re
from typing import Any

from bv.backends import Reply

_CHOICE_LINE = re.compile(r"^([A-Z])\. ", re.MULTILINE)


def _user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return ""


def _labels(messages: list[dict[str, Any]]) -> list[str]:
    """The option labels of the question, read from the `## Choices` section bv prompt wrote."""
    for message in messages:
        if message.get("role") != "user":
            continue
        text = _user_text([message])
        if "## Choices" in text:
            return _CHOICE_LINE.findall(text.split("## Choices", 1)[1])
    return []


class ChanceBackend:
    name = "chance"
    endpoint = None
    cacheable = False

    def __init__(self, seed: int = 0) -> None:
        self.model = "chance"
        self.seed = seed

    @classmethod
    def from_config(cls, seed: int | None = None, **_: Any) -> ChanceBackend:
        return cls(seed=seed or 0)

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Reply:
        labels = _labels(messages)
        if not labels:
            return Reply(
                content="A blank question; the chance baseline does not guess. \\boxed{}",
                finish_reason="stop",
                model=self.model,
            )
        blob = json.dumps([self.seed, params.get("run", 0), _user_text(messages[:2])], sort_keys=True)
        rng = random.Random(hashlib.sha256(blob.encode()).digest())
        return Reply(
            content=f"Guessing uniformly among {len(labels)} options. \\boxed{{{rng.choice(labels)}}}",
            finish_reason="stop",
            model=self.model,
        )

    async def aclose(self) -> None:
        pass
