"""A rollout row, made from how its turns ended: by the engine (bv.stages.rollout's
`rollout_one`) and by the replay of cached rows (bv.stages.replay) alike, so the two write the
same rows."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from bv import __version__
from bv.core.records import PromptRecord, RolloutFields, RolloutRow, Turn, Usage, without_stage
from bv.core.shards import label
from bv.engine.backends import Backend, endpoint_of
from bv.engine.caller import Caller
from bv.engine.prices import row_cost
from bv.stages.artifacts import Artifacts
from bv.stages.rollout_config import RolloutConfig

_stamp: tuple[int, str] = (-1, "")


def now_utc() -> str:
    """The time now in ISO 8601, UTC, to the second; formatted once a second, not per row (the
    C library's strftime looks up the local time zone on every call)."""
    global _stamp
    second = int(time.time())
    if second != _stamp[0]:
        _stamp = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _stamp[1]


@dataclass
class Ended:
    """How a row's turns ended: what `finished_row` makes the row of (the engine's rows and the
    replayed ones alike, bv.stages.replay)."""

    conversation: list[dict[str, Any]]  # the messages of the last turn sent
    turns: list[Turn]
    answered: bool
    error: str | None
    filtered: str | None  # the content filter's categories, when it refused the prompt
    started_at: str
    started: float  # time.monotonic() when the row began


def finished_row(
    record: PromptRecord,
    run: int,
    caller: Caller,
    config: RolloutConfig,
    ended: Ended,
    artifacts: Artifacts | None = None,
) -> RolloutRow:
    """The row of one run of a record, counted in the run's progress; its artifacts written."""
    turns, error, answered, started_at = ended.turns, ended.error, ended.answered, ended.started_at
    stats = caller.stats
    stats.done += 1
    stats.errors += error is not None
    stats.instant += error is None and all(t["cached"] for t in turns)  # the cache answered at once
    last = turns[-1] if turns and error is None else None
    response = last["content"] if last is not None else None
    stats.answered += answered and last is not None
    fields: RolloutFields = {
        "run": run,
        "backend": caller.backend.name,
        "model": caller.backend.model,
        "params": config.request.recorded,
        "response": response,
        "turns": turns,
        "usage": row_usage(turns),
        "latency_s": round(time.monotonic() - ended.started, 4),
        "error": error,
        "refusal": last.get("refusal") if last is not None else None,
        "content_filter": ended.filtered or (last.get("content_filter") if last is not None else None),
        "cut_off": last is not None and last["finish_reason"] == "length" and not answered,
        "bv_version": __version__,
        "endpoint": made_at(last, caller.backend),
        "cached": last is not None and last["cached"],
        "started_at": started_at,
        "cost_usd": None,
        "price_source": None,
    }
    if config.price_book is not None:
        cost = row_cost(config.price_book, turns, caller.backend.model, caller.backend.endpoint, started_at)
        fields["cost_usd"], fields["price_source"] = cost.usd, cost.source
    if config.shard is not None:
        fields["shard"] = label(config.shard)
    if config.recorded_templates:  # only when a replaced refine.md may have been sent
        fields["rollout_templates"] = config.recorded_templates
    row = cast(RolloutRow, {**without_stage(record, "rollout"), **fields})
    if artifacts is not None:
        final = [{"role": "assistant", "content": last["content"]}] if last is not None else []
        artifacts.write(row, ended.conversation + final)
    return row


# A reply from the cache stored by a bv that did not record where it was made.
UNKNOWN_MAKER = "unknown (cached by an older bv)"


def made_at(last: Turn | None, backend: Backend) -> str:
    """The endpoint a row's final reply came from: for a reply from the cache, the one that made
    it (under the default `cache_scope`, a model's replies are shared by its endpoints; a key
    that names the endpoint was made there)."""
    if last is None or not last["cached"]:
        return endpoint_of(backend)
    return last.get("endpoint") or (endpoint_of(backend) if backend.cache_scope else UNKNOWN_MAKER)


def row_usage(turns: list[Turn]) -> Usage:
    """Tokens summed over a row's turns; reasoning_tokens and cached_tokens only when some turn's
    server gave them (a missing count is not a zero). One pass (four generators cost more than
    the rest of a replayed row's fields)."""
    prompt = completion = 0
    reasoning = cached = None
    for turn in turns:
        counts = turn["usage"]
        prompt += counts.get("prompt_tokens", 0)
        completion += counts.get("completion_tokens", 0)
        if "reasoning_tokens" in counts:
            reasoning = (reasoning or 0) + counts["reasoning_tokens"]
        if "cached_tokens" in counts:
            cached = (cached or 0) + counts["cached_tokens"]
    usage: Usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    if reasoning is not None:
        usage["reasoning_tokens"] = reasoning
    if cached is not None:
        usage["cached_tokens"] = cached
    return usage
