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
from typing import Any

from bv.core.environment import replays
from bv.core.errors import BadRecord, ItemFailure
from bv.core.extract import has_answer_async
from bv.core.jsonl import Problems, read_records
from bv.core.outcome import Outcome
from bv.core.records import PromptRecord, RolloutRow, Turn, check_prompt_record
from bv.core.shards import in_shard, label
from bv.engine.backends import make_backend
from bv.engine.backends.replies import ContentFiltered
from bv.engine.caller import Caller, run_stage
from bv.engine.prices import first_url
from bv.engine.progress import Stats
from bv.stages.artifacts import Artifacts
from bv.stages.rollout_config import RolloutConfig
from bv.stages.rollout_rows import Ended, finished_row, now_utc
from bv.stages.rollout_turns import expand_runs, next_turn, refusal_or_filtered


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
    ended = Ended(conversation, turns, answered, error, filtered, started_at, started)
    return finished_row(record, run, caller, config, ended, artifacts)


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
    runner: Callable[..., Outcome] = run_stage
    extra: dict[str, Any] = {}
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
        if replays():
            from bv.stages.replay import replayer

            extra["replay"] = replayer(caller, config, artifacts)
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
            **extra,
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
