"""Rows the reply cache answers whole, made without the request engine: a rollout's replay.

Every `bv optimize` resume and gate, every re-run of `bv eval` after a crash, rolls out prompts
whose replies are all in the cache. The engine would give each row a worker's turn, a cache
key made from the whole request (its images hashed, its JSON written) and a lookup of its own.
A replay takes the rows the reader handed over together (bv.engine.stream's `replay`): each
prompt's key made once for all its runs (`Caller.prompt_keys`), one lookup for the batch's
keys, and each row made by the very function the engine's rows are made by (`finished_row`).
A row the cache cannot answer whole (a reply missing, an image that fails, a reply long enough
to be read off the event loop) is left to the engine, which does what it always did.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from bv.core.errors import ItemFailure
from bv.core.extract import EXTRACT_IN_LOOP_CHARS, has_answer
from bv.core.records import PromptRecord, RolloutRow, Turn
from bv.engine.backends import Reply
from bv.engine.cache import RequestKey
from bv.engine.caller import Caller
from bv.stages.artifacts import Artifacts
from bv.stages.rollout_config import RolloutConfig
from bv.stages.rollout_rows import Ended, finished_row, now_utc
from bv.stages.rollout_turns import next_turn, refusal_or_filtered

Task = tuple[PromptRecord, int]  # a record and its run


def replayer(
    caller: Caller, config: RolloutConfig, artifacts: Artifacts | None
) -> Callable[[Sequence[Task]], list[RolloutRow | None]] | None:
    """The replay of a rollout's tasks, batch by batch (None: this run has no cache to replay)."""
    cache = caller.cache
    if cache is None or not caller.backend.cacheable:
        return None
    params, max_turns = config.request.body, config.max_turns
    last: list[Any] = [None, None]  # the record whose keys were made last, and its keys

    def keys_of(record: PromptRecord) -> RequestKey | None:
        if record is not last[0]:  # a record's runs come one after another (expand_runs)
            try:
                last[1] = caller.prompt_keys(record["messages"], params)
            except ItemFailure:
                last[1] = None  # its image fails: the engine writes the row with the error
            last[0] = record
        return last[1]

    def replay(tasks: Sequence[Task]) -> list[RolloutRow | None]:
        rows: list[RolloutRow | None] = [None] * len(tasks)
        started_at = now_utc()
        live: list[tuple[int, Ended, str]] = []  # each task answered so far: how far, its next key
        for index, (record, run) in enumerate(tasks):
            made = keys_of(record)
            if made is not None:
                ended = Ended(record["messages"], [], False, None, None, started_at, time.monotonic())
                live.append((index, ended, made(run, 0)))
        turn = 0
        while live:
            found = cache.get_many([key for _, _, key in live])
            going: list[tuple[int, Ended, str]] = []
            for index, ended, key in live:
                data = found.get(key)
                if data.__class__ is not dict:
                    continue  # not in the cache: the engine sends it
                reply = Reply.from_json(data)
                if len(reply.content) > EXTRACT_IN_LOOP_CHARS:
                    continue  # the engine reads such a reply off the event loop
                turns: list[Turn] = ended.turns
                turns.append({**reply.to_json(), "cached": True})
                ended.answered = has_answer(reply.content)
                record, run = tasks[index]
                if turn + 1 == max_turns or ended.answered or refusal_or_filtered(reply):
                    caller.stats.cache_hits += len(turns)
                    for each in turns:
                        caller.note_maker(each)
                    rows[index] = finished_row(record, run, caller, config, ended, artifacts)
                    continue
                ended.conversation = next_turn(ended.conversation, reply, config.templates)
                try:
                    later = caller.prompt_keys(ended.conversation, params)
                except ItemFailure:
                    continue
                if later is not None:
                    going.append((index, ended, later(run, turn + 1)))
            live = going
            turn += 1
        return rows

    return replay
