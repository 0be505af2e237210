"""A backend answering from a table, in process, for the engine's tests (no server)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

from bv.engine.backends import Reply


class ScriptedBackend:
    """Answers each prompt from a table, in turn: a reply text, or an exception to raise. The last
    entry repeats; prompts not in the table are answered with their own text."""

    name, model, endpoint, cache_scope, cacheable = "scripted", "m", "table", "table", False

    def __init__(self, table: dict[str, list[Any]] | None = None, max_delay_s: float = 0.005) -> None:
        self.table = {prompt: list(steps) for prompt, steps in (table or {}).items()}
        self.max_delay_s = max_delay_s
        self.calls: Counter[str] = Counter()

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Reply:
        prompt = messages[-1]["content"]
        self.calls[prompt] += 1
        await asyncio.sleep(random.uniform(0, self.max_delay_s))
        steps = self.table.get(prompt, [prompt])
        step = steps.pop(0) if len(steps) > 1 else steps[0]
        if isinstance(step, BaseException):
            raise step
        return Reply(content=step)

    async def aclose(self) -> None:
        pass
