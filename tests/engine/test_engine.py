"""The engine in process: a scripted backend answering from a table, under random delays.

Subprocess tests show what a user sees; these reach what only the engine knows: the order rows
are written in, how far ahead of the writer work runs, and every way a task can end.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from typing import Any

import pytest
from support.scripted import ScriptedBackend

from bv.core.errors import Fatal, ItemFailure, StdoutClosed, Transient
from bv.engine.caller import Caller
from bv.engine.progress import Stats
from bv.engine.retry import RetryPolicy
from bv.engine.stream import run_stream


def caller_for(backend: ScriptedBackend, retries: int = 2) -> Caller:
    return Caller(backend, None, Stats(), RetryPolicy(retries=retries, base_s=0.001))


def run(tasks, work, *, jobs: int = 8, ordered: bool = False, grace_s: float = 5.0, write=None):
    written: list[dict[str, Any]] = []

    async def go():
        return await run_stream(
            tasks, work, write or written.append, jobs=jobs, ordered=ordered, grace_s=grace_s
        )

    return asyncio.run(go()), written


def asking(caller: Caller):
    """The work of a stage: ask the backend about one task; a failed item is a row with `error`."""

    async def work(n: int) -> dict[str, Any]:
        try:
            reply, _ = await caller.call([{"role": "user", "content": f"q{n}"}], {})
        except ItemFailure as exc:
            return {"n": n, "reply": None, "error": str(exc)}
        return {"n": n, "reply": reply.content, "error": None}

    return work


@pytest.mark.parametrize("ordered", [True, False])
def test_every_row_written_once_in_order_when_asked(ordered):
    random.seed(1)
    backend = ScriptedBackend(max_delay_s=0.01)
    outcome, written = run(range(300), asking(caller_for(backend)), jobs=16, ordered=ordered)
    assert not outcome.interrupted and outcome.fatal is None and outcome.broken_rows == 0
    seen = [row["n"] for row in written]
    assert sorted(seen) == list(range(300))
    if ordered:
        assert seen == list(range(300))
    assert all(row["reply"] == f"q{row['n']}" for row in written)
    assert max(backend.calls.values()) == 1


def test_ordered_work_stays_within_its_window_of_the_writer():
    """While row 0 is slow, no task far ahead of it starts, and the reader stays close behind."""
    jobs, read, started = 4, [], []
    release = None

    def tasks():
        for n in range(1000):
            read.append(n)
            yield n

    async def work(n: int) -> dict[str, Any]:
        started.append(n)
        if n == 0:
            await release.wait()
        return {"n": n}

    async def go():
        nonlocal release
        release = asyncio.Event()
        written: list[dict[str, Any]] = []
        running = asyncio.ensure_future(run_stream(tasks(), work, written.append, jobs=jobs, ordered=True))
        await asyncio.sleep(0.5)  # plenty of time to run ahead, were it allowed
        ahead, read_ahead = max(started), max(read)
        release.set()
        outcome = await running
        return outcome, written, ahead, read_ahead

    outcome, written, ahead, read_ahead = asyncio.run(go())
    window = max(4 * jobs, 64)
    assert ahead == window - 1  # tasks 1..window-1 ran while row 0 waited; none beyond
    # The reader is held back too (2 x jobs queued past the workers waiting their turn): memory
    # stays bounded however long the input.
    assert read_ahead <= window + 3 * jobs + 1
    assert [row["n"] for row in written] == list(range(1000)) and not outcome.interrupted


def test_retries_item_failures_and_broken_rows_each_cost_only_their_row():
    random.seed(2)
    table = {
        "q1": [Transient("HTTP 503"), Transient("HTTP 429"), "late"],  # two retries, then an answer
        "q2": [Transient("HTTP 503")],  # retries run out
        "q3": [ItemFailure("HTTP 400: bad image")],  # not retried
        "q4": [ValueError("a bug in a backend")],  # an unforeseen error: retried like a transient
    }
    backend = ScriptedBackend(table)
    caller = caller_for(backend, retries=2)
    work = asking(caller)

    async def buggy(n: int) -> dict[str, Any]:
        if n == 5:
            raise KeyError("a bug in the stage")
        return await work(n)

    outcome, written = run(range(8), buggy, jobs=3, ordered=True)
    rows = {row["n"]: row for row in written}
    assert sorted(rows) == [0, 1, 2, 3, 4, 6, 7] and outcome.broken_rows == 1  # row 5 left out, said
    assert rows[1]["reply"] == "late" and backend.calls["q1"] == 3
    assert rows[2]["error"] == "HTTP 503 (gave up after 3 tries)" and backend.calls["q2"] == 3
    assert rows[3]["error"] == "HTTP 400: bad image" and backend.calls["q3"] == 1
    assert "ValueError: a bug in a backend" in rows[4]["error"] and backend.calls["q4"] == 3
    assert outcome.fatal is None and not outcome.interrupted


def test_a_fatal_error_stops_the_run_keeping_what_finished():
    random.seed(3)
    backend = ScriptedBackend({"q20": [Fatal("the server refused the API key (HTTP 401)")]}, 0.002)
    outcome, written = run(range(500), asking(caller_for(backend)), jobs=4, ordered=True)
    assert outcome.fatal == "the server refused the API key (HTTP 401)"
    seen = [row["n"] for row in written]
    assert seen == sorted(seen) and set(range(20 - 4)) <= set(seen)  # in order; what finished is kept
    assert len(written) < 100  # the rest was never sent
    assert sum(backend.calls.values()) < 100


def test_a_closed_stdout_ends_the_run_quietly():
    def write(row: dict[str, Any]) -> None:
        if row["n"] == 10:
            raise StdoutClosed()

    outcome, _ = run(range(10_000), asking(caller_for(ScriptedBackend())), ordered=True, write=write)
    assert outcome.stdout_closed and outcome.fatal is None


def test_an_input_that_breaks_midway_raises_after_writing_what_came_before():
    def tasks():
        yield from range(10)
        raise OSError("input vanished")

    written: list[dict[str, Any]] = []

    async def go():
        await run_stream(tasks(), asking(caller_for(ScriptedBackend())), written.append, jobs=2, ordered=True)

    with pytest.raises(OSError, match="input vanished"):
        asyncio.run(go())
    assert [row["n"] for row in written] == list(range(10))


def test_sigterm_stops_new_work_and_lets_work_in_flight_finish():
    """In process: SIGTERM is the first Ctrl-C. Work in flight finishes within the grace period and
    is written; no new task starts; the handler from before is back afterwards."""
    started: list[int] = []
    jobs = 3

    async def work(n: int) -> dict[str, Any]:
        started.append(n)
        if len(started) == 10:
            os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.2)
        return {"n": n}

    before = signal.getsignal(signal.SIGTERM)
    outcome, written = run(range(1000), work, jobs=jobs, ordered=True, grace_s=5.0)
    assert outcome.signal == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before
    assert 10 <= len(started) <= 10 + jobs  # at most the workers already past their queue
    assert sorted(row["n"] for row in written) == sorted(started)  # every task started was written


def test_after_the_grace_period_work_in_flight_is_abandoned():
    async def work(n: int) -> dict[str, Any]:
        if n == 3:
            os.kill(os.getpid(), signal.SIGINT)
        if n >= 2:
            await asyncio.sleep(60)  # never finishes in time
        return {"n": n}

    outcome, written = run(range(100), work, jobs=4, ordered=True, grace_s=0.3)
    assert outcome.signal == signal.SIGINT
    assert [row["n"] for row in written] == [0, 1]
