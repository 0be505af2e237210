"""The engine's Caller with a real reply cache, in process: a reply is paid for once, what is not
a finished reply is never cached, and the key keeps runs, turns and parameters apart."""

from __future__ import annotations

import asyncio
import random

from support.scripted import ScriptedBackend

from bv.core.errors import ItemFailure, Transient
from bv.engine.cache import ReplyCache
from bv.engine.caller import Caller
from bv.engine.progress import Stats
from bv.engine.retry import RetryPolicy
from bv.engine.stream import run_stream


class CachedBackend(ScriptedBackend):
    cacheable = True


def caller(backend: ScriptedBackend, path, retries: int = 1) -> Caller:
    return Caller(backend, ReplyCache(path), Stats(), RetryPolicy(retries=retries, base_s=0.001))


def asking(backend: ScriptedBackend, path, questions: list[tuple]) -> tuple[list, Caller]:
    """One run (one event loop, as in a stage): each (text, params, run, turn, keep) asked in turn;
    a reply and whether it was cached, or the ItemFailure raised."""

    async def go() -> tuple[list, Caller]:
        calls, answers = caller(backend, path), []
        for text, params, run, turn, keep in questions:
            try:
                answers.append(await calls.call([{"role": "user", "content": text}], params, run, turn, keep))
            except ItemFailure as exc:
                answers.append(exc)
        return answers, calls

    return asyncio.run(go())


def question(text: str, params=None, run: int = 0, turn: int = 0, keep=None) -> tuple:
    return (text, params or {}, run, turn, keep)


def test_a_reply_is_paid_for_once_also_by_the_next_run(tmp_path):
    backend = CachedBackend({"q": ["the answer"]})
    [(reply, cached)], _ = asking(backend, tmp_path / "c.sqlite", [question("q")])
    assert (reply.content, cached, backend.calls["q"]) == ("the answer", False, 1)
    [(reply, cached)], again = asking(backend, tmp_path / "c.sqlite", [question("q")])  # the next run
    assert (reply.content, cached, backend.calls["q"]) == ("the answer", True, 1)
    assert again.stats.cache_hits == 1 and again.stats.requests == 0


def test_runs_turns_and_parameters_are_cached_apart(tmp_path):
    backend = CachedBackend()
    variants = [
        question("q", p, run=r, turn=t)
        for r, t, p in [(0, 0, {}), (1, 0, {}), (0, 1, {}), (0, 0, {"temperature": 0.7})]
    ]
    answers, _ = asking(backend, tmp_path / "c.sqlite", [v for v in variants for _ in (0, 1)])
    assert [cached for _, cached in answers] == [False, True] * 4
    assert backend.calls["q"] == 4


def test_failures_and_refused_replies_are_not_cached(tmp_path):
    backend = CachedBackend(
        {"down": [Transient("HTTP 503")], "bad": [ItemFailure("HTTP 400")], "v": ["maybe"]}
    )
    verdicts_only = lambda reply: reply.content in ("True", "False")  # noqa: E731 (the judge's rule)
    questions = [question("down"), question("bad")] * 2 + [question("v", keep=verdicts_only)] * 2
    answers, calls = asking(backend, tmp_path / "c.sqlite", questions)
    assert [type(a).__name__ for a in answers[:4]] == ["ItemFailure"] * 4
    assert str(answers[0]) == "HTTP 503 (gave up after 2 tries)" and str(answers[1]) == "HTTP 400"
    assert backend.calls["down"] == 4 and backend.calls["bad"] == 2  # asked again each time
    assert [(reply.content, cached) for reply, cached in answers[4:]] == [("maybe", False)] * 2
    assert backend.calls["v"] == 2 and calls.stats.cache_hits == 0  # the judge keeps only verdicts


def test_a_run_under_random_delays_asks_each_prompt_once_then_the_cache_answers(tmp_path):
    random.seed(5)
    backend = CachedBackend(max_delay_s=0.01)
    path = tmp_path / "c.sqlite"

    def run_once() -> tuple[list[dict], Stats]:
        calls = caller(backend, path)
        written: list[dict] = []

        async def work(n: int) -> dict:
            reply, cached = await calls.call([{"role": "user", "content": f"q{n % 50}"}], {}, run=n // 50)
            return {"n": n, "reply": reply.content, "cached": cached}

        asyncio.run(run_stream(range(200), work, written.append, jobs=16, ordered=True))
        return written, calls.stats

    first, stats = run_once()
    assert [row["n"] for row in first] == list(range(200)) and stats.requests == 200
    assert all(row["reply"] == f"q{row['n'] % 50}" and not row["cached"] for row in first)
    second, stats = run_once()
    assert [row["reply"] for row in second] == [row["reply"] for row in first]
    assert all(row["cached"] for row in second) and stats.requests == 0 and stats.cache_hits == 200
    assert set(backend.calls.values()) == {4}  # q0..q49, once per run (4 runs), never again
