"""The rollout stage: send each prompt record to a model and record what came back.

A record is rolled out `repeats` times (`run` 0..K-1, the paper's Avg@k protocol). Each
run takes up to `max_turns` turns: when a reply has no final answer in \\boxed{}, the next
turn sends the reply back with the refinement prompt. A row whose requests failed is still
written, with `error` set and no cached reply, so the next run of the same command retries
exactly the failed and unfinished rows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from datetime import UTC, datetime
from typing import Any, cast

from bv import __version__
from bv.core.errors import BadRecord, ItemFailure
from bv.core.extract import has_answer_async
from bv.core.jsonl import Problems, read_records
from bv.core.outcome import Outcome
from bv.core.records import (
    PromptRecord,
    RolloutFields,
    RolloutRow,
    Turn,
    Usage,
    check_prompt_record,
    without_stage,
)
from bv.core.shards import label
from bv.engine.backends import Backend, endpoint_of, make_backend
from bv.engine.backends.replies import ContentFiltered
from bv.engine.caller import Caller, run_stage
from bv.engine.prices import first_url, row_cost
from bv.engine.progress import Stats
from bv.stages.artifacts import Artifacts
from bv.stages.rollout_config import RolloutConfig, expand_runs, in_shard, next_turn, refusal_or_filtered

_stamp: tuple[int, str] = (-1, "")


def now_utc() -> str:
    """The time now in ISO 8601, UTC, to the second; formatted once a second, not per row (the
    C library's strftime looks up the local time zone on every call)."""
    global _stamp
    second = int(time.time())
    if second != _stamp[0]:
        _stamp = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _stamp[1]


async def rollout_one(
    record: PromptRecord, run: int, caller: Caller, config: RolloutConfig, artifacts: Artifacts | None = None
) -> RolloutRow:
    """Roll one record out once; never raises for a failed item, it records the error instead."""
    conversation = list(record["messages"])
    turns: list[Turn] = []
    error = filtered = None
    answered = False
    started_at, started = now_utc(), time.monotonic()
    try:
        for turn in range(config.max_turns):
            reply, cached = await caller.call(conversation, config.request.body, run=run, turn=turn)
            turns.append({**reply.to_json(), "cached": cached})
            answered = await has_answer_async(reply.content)
            if turn + 1 == config.max_turns or answered or refusal_or_filtered(reply):
                break
            conversation = next_turn(conversation, reply, config.templates)
    except ContentFiltered as exc:  # the prompt refused (Azure's HTTP 400): an error, named
        error, filtered = str(exc), exc.categories
    except ItemFailure as exc:
        error = str(exc)
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
        "latency_s": round(time.monotonic() - started, 4),
        "error": error,
        "refusal": last.get("refusal") if last is not None else None,
        "content_filter": filtered or (last.get("content_filter") if last is not None else None),
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
        artifacts.write(row, conversation + final)
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
    server gave them (a missing count is not a zero)."""
    usage: Usage = {
        "prompt_tokens": sum(t["usage"].get("prompt_tokens", 0) for t in turns),
        "completion_tokens": sum(t["usage"].get("completion_tokens", 0) for t in turns),
    }
    if any("reasoning_tokens" in t["usage"] for t in turns):
        usage["reasoning_tokens"] = sum(t["usage"].get("reasoning_tokens", 0) for t in turns)
    if any("cached_tokens" in t["usage"] for t in turns):
        usage["cached_tokens"] = sum(t["usage"].get("cached_tokens", 0) for t in turns)
    return usage


def _prompt_records(problems: Problems) -> Callable[[Any], PromptRecord]:
    """check_prompt_record, saying once when the input is items that have not been through bv prompt."""
    hinted = False

    def parse(value: Any) -> PromptRecord:
        nonlocal hinted
        try:
            return check_prompt_record(value)
        except BadRecord:
            if not hinted and "messages" not in value and ("question" in value or "taskId" in value):
                hinted = True
                problems.stream.write(
                    "bv rollout: the input holds items, not prompt records: run them through bv prompt"
                    " first (bv prompt items.jsonl | bv rollout -m MODEL)\n"
                )
            raise

    return parse


def read_prompt_records(inputs: tuple[str, ...], problems: Problems) -> Iterator[PromptRecord]:
    """The prompt records of JSONL files ("-": stdin), checked, lazily; bad lines to `problems`.
    Parsed by orjson where it gives json's very value (bv.core.jsonl's `fast`): the reader
    thread's ~40 us a record competed with the event loop for the interpreter at -j 512."""
    return (record for _, record in read_records(inputs, problems, _prompt_records(problems), fast=True))


def run_rollout(
    records: Iterable[PromptRecord],
    config: RolloutConfig,
    write: Callable[[Mapping[str, Any]], None],
    *,
    total: int | None = None,
) -> Outcome:
    """The whole stage: roll out every record of this shard `config.repeats` times, each row to
    `write` as it finishes (in input order with `config.ordered`). `total`: how many records
    there are, for the progress display (a list's own length by default)."""
    backend = make_backend(config.backend, **config.backend_config)
    records_in: Iterable[PromptRecord] = records
    if config.shard is not None:
        records_in = (r for r in records if in_shard(str(r["id"]), config.shard))
        total = None
    elif total is None and isinstance(records, Sized):
        total = len(records)
    artifacts = None if config.artifacts is None else Artifacts(config.artifacts)
    stats = Stats(total=None if total is None else total * config.repeats, spent_usd=config.spent_before)
    stats.shard = None if config.shard is None else label(config.shard)
    stopping = asyncio.Event()
    settings = config.settings
    runner = run_stage
    if config.batch:
        from bv.engine.batch import BatchCaller, run_batch_stage
        from bv.stages.estimate import prompt_token_bound

        bound = prompt_token_bound(config.request.body.get("max_pixels"))
        caller: Caller = BatchCaller.for_batches(
            backend, settings, stats, stopping, "rollout", config.request.max_tokens, bound
        )
        runner = run_batch_stage
    else:
        from bv.stages.estimate import online_worst_case

        caller = Caller.for_run(backend, settings, stats, stopping)
        caller.worst_case = online_worst_case(
            config.price_book,
            config.max_cost,
            backend.model,
            first_url(backend.endpoint),
            config.request.max_tokens,
            config.request.body.get("max_pixels"),
        )
    try:
        outcome = runner(
            expand_runs(records_in, config.repeats),
            lambda task: rollout_one(task[0], task[1], caller, config, artifacts),
            write,
            settings=settings,
            stats=stats,
            label="rollout",
            stopping=stopping,
            backend=backend,
            caller=caller,
        )
    finally:
        if artifacts is not None:
            artifacts.finish()
    outcome.rows, outcome.failed, outcome.spent_usd = stats.done, stats.errors, stats.spent_usd
    outcome.cached = stats.done - stats.errors if caller.cache is not None else None
    return outcome


def dry_run_rollout(records: Iterable[PromptRecord], config: RolloutConfig) -> list[str]:
    """What the rollout would send and cost, sending nothing: the dry run's report, line by line."""
    from bv.engine.cache import ReplyCache
    from bv.stages.dryrun import plan_lines, plan_rollout
    from bv.stages.estimate import cost_lines, guess_completions

    backend = make_backend(config.backend, **config.backend_config)
    path = config.cache
    cache = ReplyCache(path) if path is not None and path.exists() and backend.cacheable else None
    shard = config.shard
    try:
        plan = plan_rollout((r for r in records if in_shard(str(r["id"]), shard)), backend, cache, config)
        completions = guess_completions(cache, backend.name, backend.model, config.request.max_tokens)
    finally:
        if cache is not None:
            cache.close()
    lines = plan_lines(plan, backend, config.repeats, config.max_turns, path if backend.cacheable else None)
    if shard is not None:  # which part of the items this task takes, before it spends anything
        lines.insert(
            1, f"shard:         {label(shard)} (the items whose id hashes to {shard[0]} modulo {shard[1]})"
        )
    where = first_url(backend.endpoint)
    return lines + cost_lines(
        config.price_book,
        backend.model,
        where,
        plan.to_send,
        plan.may_send,
        plan.prompt_tokens,
        completions,
        batch=config.batch,
    )
