"""`bv optimize --dry-run`'s dollars: what the most requests of each role (the target, the judge,
the optimizer) would cost, by the estimator `bv eval --dry-run` uses (bv.stages.estimate's
cost_lines over prompt tokens estimated as bv.stages.dryrun does), sending nothing.

The target's prompts are the seed skill's over the run's items; the judge's as bv eval's dry run
estimates them ahead of the rollout (bv.stages.judge_plan.plan_judge_ahead); the optimizer's are
reflection prompts on a minibatch of the train items, each reply at the length the prompt keeps
of it (MAX_RESPONSE_CHARS), so the most one can be. The cache is not looked up: these are the
requests before it answers any.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from bv.core.records import Item, JudgedRow
from bv.engine.cache import ReplyCache
from bv.engine.prices import first_url
from bv.optimize import stage_calls
from bv.optimize.reflect import MAX_RESPONSE_CHARS, reflection_prompt
from bv.stages.dryrun import CHARS_PER_TOKEN, ImageCosts, request_cost
from bv.stages.estimate import cost_lines, guess_completions
from bv.stages.judge_config import JudgeConfig
from bv.stages.judge_plan import plan_judge_ahead
from bv.stages.prompt import Skill
from bv.stages.rollout_config import RolloutConfig


def plan_costs(
    items: Sequence[Item],
    train: Sequence[Item],
    seed_skill: Skill,
    engines: stage_calls.Engines,
    reflecting: tuple[int, int],
    requests: Mapping[str, int],
    configs: stage_calls.Configs,
) -> list[str]:
    """The dry run's cost lines: each role's completions and cost, or one line saying why none.
    `reflecting`: the minibatch size and the edits a reflection may propose."""
    target, judge, optimizer = configs
    if target.price_book is None:
        return ["cost: not estimated: give `prices` (a price file, or genai-prices)"]
    path = engines.sending.cache
    cache = ReplyCache(path) if path is not None and path.exists() else None
    try:
        records = stage_calls.prompts(items, seed_skill, engines)
        costs = ImageCosts(target.request.max_pixels)
        per_prompt = sum(request_cost(r["messages"], costs)[1] for r in records) / max(len(records), 1)
        sent = requests["target"] // max(target.max_turns, 1)  # first turns; the rest refinements
        lines = _role("target", target, cache, sent, requests["target"] - sent, per_prompt)
        if judge.endpoint is not None and requests["judge"]:
            ahead = plan_judge_ahead(records, judge, 1)
            lines += _judge(judge, cache, requests["judge"], ahead.prompt_tokens / max(ahead.to_send, 1))
        reflect = _reflection_tokens(seed_skill, train or items, reflecting, engines)
        lines += _role("optimizer", optimizer, cache, requests["optimizer"], 0, reflect)
    finally:
        if cache is not None:
            cache.close()
    return lines


def _role(
    role: str, config: RolloutConfig, cache: ReplyCache | None, sent: int, may: int, per_prompt: float
) -> list[str]:
    endpoint = config.backend_config.get("endpoint")
    model, url = (
        (endpoint.model, first_url(endpoint.public)) if endpoint is not None else (config.model, None)
    )
    completions = guess_completions(cache, config.backend, model, config.request.max_tokens)
    found = cost_lines(config.price_book, model, url, sent, may, round(sent * per_prompt), completions)
    return [f"{role} cost:", *(f"  {line}" for line in found)]


def _judge(config: JudgeConfig, cache: ReplyCache | None, sent: int, per_prompt: float) -> list[str]:
    endpoint = config.endpoint
    assert endpoint is not None
    limit = config.token_limit
    completions = guess_completions(
        cache, "openai", endpoint.model, limit if isinstance(limit, int) else None
    )
    url = first_url(endpoint.public)
    found = cost_lines(
        config.price_book, endpoint.model, url, sent, 0, round(sent * per_prompt), completions, config.batch
    )
    return ["judge cost:", *(f"  {line}" for line in found)]


def _reflection_tokens(
    skill: Skill, train: Sequence[Item], reflecting: tuple[int, int], engines: stage_calls.Engines
) -> float:
    """The estimated tokens of one reflection prompt: a minibatch of train items, each answered
    wrong with a reply as long as the prompt keeps."""
    reply: dict[str, Any] = {"response": "x" * MAX_RESPONSE_CHARS, "extracted": None, "hard": 0}
    minibatch, edits = reflecting
    rows = [cast(JudgedRow, {**item, **reply}) for item in train[:minibatch]]
    text = reflection_prompt(skill.text, rows, edits, engines.templates)
    return math.ceil(len(text) / CHARS_PER_TOKEN)
