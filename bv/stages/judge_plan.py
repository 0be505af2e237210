"""`bv judge --dry-run`: what the judge would ask its LLM and what that would cost, sending nothing.

It reads the rollout rows as the judge would, lets the rules decide what they decide (free), and
looks every request the LLM judge would get up in the reply cache; for the requests still to send
it estimates their prompt tokens. Nothing is sent and nothing is written to the cache.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from bv.core.extract import extract_answer
from bv.core.records import PromptRecord, RolloutRow, message_text, without_stage
from bv.core.rules import decide
from bv.core.stats import counted, human_count
from bv.engine.backends import Backend, make_backend
from bv.engine.cache import ImageHashes, ReplyCache
from bv.engine.prices import first_url
from bv.stages.dryrun import CHARS_PER_TOKEN, cached_reply
from bv.stages.judge import judge_messages, judge_params, parse_verdict
from bv.stages.judge_config import JudgeConfig


@dataclass
class JudgePlan:
    """The figures a judge's dry run prints."""

    rows: int = 0
    not_judged: int = 0  # rows whose rollout failed
    by_rules: int = 0  # decided by the rules (or left undecided without an LLM judge)
    to_llm: int = 0  # asked of the LLM judge
    cached: int = 0  # of those, answered by the cache with a verdict
    to_send: int = 0
    prompt_tokens: int = 0  # estimated, for the requests to send


def plan_judge(
    records: Iterable[RolloutRow], config: JudgeConfig, backend: Backend | None, cache: ReplyCache | None
) -> JudgePlan:
    plan, hashes = JudgePlan(), ImageHashes()
    params = judge_params(config.endpoint, config.judge_params) if config.endpoint is not None else {}
    for record in records:
        plan.rows += 1
        if record.get("error"):
            plan.not_judged += 1
            continue
        row = cast(RolloutRow, without_stage(record, "judge"))
        extracted = extract_answer(row.get("response"))
        if backend is None or (config.mode == "auto" and decide(row, extracted).hard is not None):
            plan.by_rules += 1
            continue
        plan.to_llm += 1
        messages = judge_messages(row, extracted, config.templates)
        found = cached_reply(cache, backend, messages, params, 0, 0, hashes) if cache is not None else None
        if found is not None and parse_verdict(found.content) is not None:  # what the judge keeps
            plan.cached += 1
            continue
        plan.to_send += 1
        text = sum(len(message_text(m.get("content"))) for m in messages)
        plan.prompt_tokens += math.ceil(text / CHARS_PER_TOKEN)
    return plan


def judge_plan_lines(plan: JudgePlan, backend: Backend | None, cache_line: str) -> list[str]:
    """The judge's dry run's report, one figure per line (its cost lines follow)."""
    if backend is None:
        who = "none: the rules alone judge"
    else:
        where = f" at {backend.endpoint}" if backend.endpoint else ""
        who = f"{backend.model} ({backend.name}{where})"
    return [
        f"judge model:   {who}",
        f"rows:          {plan.rows}",
        f"not judged:    {counted(plan.not_judged, 'row')} whose rollout failed",
        f"by the rules:  {plan.by_rules}",
        f"to the LLM:    {plan.to_llm}",
        f"in the cache:  {cache_line if backend is not None else 'not needed'}",
        f"to send:       {plan.to_send}",
        f"prompt tokens: ~{human_count(plan.prompt_tokens)} for the requests to send (estimate:"
        f" {CHARS_PER_TOKEN} characters per token)",
    ]


def plan_judge_ahead(records: Iterable[PromptRecord], config: JudgeConfig, repeats: int) -> JudgePlan:
    """The judge's requests before any rollout (`bv eval --dry-run`): its prompt holds the item's
    question and gold answer and the reply's extracted answer (taken as long as the gold one), so
    every row that may go to the LLM judge is counted, none looked up in the cache (the
    requests depend on replies not yet made)."""
    plan = JudgePlan()
    for record in records:
        plan.rows += repeats
        if config.endpoint is None:
            plan.by_rules += repeats
            continue
        row = cast(RolloutRow, record)  # judge_messages reads only the item's fields
        messages = judge_messages(row, " or ".join(record["answer"]), config.templates)
        text = sum(len(message_text(m.get("content"))) for m in messages)
        plan.to_llm += repeats
        plan.to_send += repeats
        plan.prompt_tokens += repeats * math.ceil(text / CHARS_PER_TOKEN)
    return plan


def dry_run_judge(
    records: Iterable[RolloutRow] | Iterable[PromptRecord], config: JudgeConfig, ahead: int | None = None
) -> list[str]:
    """What the judge would ask its LLM and cost, sending nothing: the dry run's report, line by
    line. With `ahead` (the repeats), `records` are prompt records and the rollout is still to
    come (`bv eval --dry-run`): every row that may reach the LLM judge is counted."""
    from bv.stages.estimate import cost_lines, guess_completions

    endpoint = config.endpoint
    backend = None if endpoint is None else make_backend("openai", endpoint=endpoint)
    path = config.cache
    cache = ReplyCache(path) if path is not None and path.exists() and backend is not None else None
    try:
        if ahead is not None:
            plan = plan_judge_ahead(records, config, ahead)
            fewer = " (the rules decide first what they can: fewer are sent)" if config.mode == "auto" else ""
            where = f"not looked up: the judge's requests depend on replies still to come{fewer}"
        else:
            plan = plan_judge(cast(Iterable[RolloutRow], records), config, backend, cache)
            where = "off (`no_cache`)" if path is None else f"{plan.cached} of these requests ({path})"
        lines = judge_plan_lines(plan, backend, where)
        if backend is None:
            return lines
        limit = config.token_limit
        completions = guess_completions(
            cache, backend.name, backend.model, limit if isinstance(limit, int) else None
        )
    finally:
        if cache is not None:
            cache.close()
    url = first_url(backend.endpoint)
    return lines + cost_lines(
        config.price_book, backend.model, url, plan.to_send, 0, plan.prompt_tokens, completions, config.batch
    )
