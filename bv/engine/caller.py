"""The request engine shared by rollout and judge: retries, cache, timeouts, the grace period.

`Caller.call` sends one chat request the way every bv stage does: look in the cache, else
try the backend under the retry policy (bv.engine.retry: its tries, its patience with 429s,
fewer in flight while they last) with a per-try timeout, store the reply. `run_stage` runs a
whole request stage: bv.engine.stream's run over the input, with progress on stderr, stopped
when its first requests are all refused the same way (`FirstRequests`).
"""

from __future__ import annotations

import asyncio
import gc
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bv.core import redaction
from bv.core.errors import (
    Fatal,
    Interrupted,
    ItemFailure,
    NoReply,
    RateLimited,
    Refused,
    Transient,
    Unreachable,
)
from bv.core.images import ImageError
from bv.core.outcome import Outcome
from bv.core.stats import dollars
from bv.engine.backends import Backend, Reply, endpoint_of
from bv.engine.cache import ImageHashes, ReplyCache, RequestKey, prompt_key
from bv.engine.deadlines import Deadlines
from bv.engine.defaults import JOBS, RATE_LIMIT_PATIENCE_S, RETRIES, STALL_NOTICE_S, TIMEOUT_S
from bv.engine.prices import Prices, first_url, reply_cost
from bv.engine.progress import SILENT_AFTER_S, ProgressDisplay, Stats, duration
from bv.engine.retry import ConcurrencyLimit, RetryPolicy
from bv.engine.stream import GRACE_S, Replay, run_stream

T = TypeVar("T")


@dataclass(frozen=True)
class RunSettings:
    """How a request stage (rollout, judge) runs; set from the command line."""

    jobs: int = JOBS
    retries: int = RETRIES
    timeout: float = TIMEOUT_S
    rate_limit_patience: float = RATE_LIMIT_PATIENCE_S  # how long one request bears 429s
    stall_notice: float = STALL_NOTICE_S  # no reply for this long: the progress line says so
    cache_path: Path | None = None  # None: no cache
    quiet: bool = False
    ordered: bool = False
    prices: Prices | None = field(default=None, compare=False)  # what replies cost; None: not priced
    max_cost: float | None = None  # USD: once spent, no new request starts (needs `prices`)


@dataclass
class Caller:
    """Sends chat requests to one backend with the cache, the retry policy and a timeout."""

    backend: Backend
    cache: ReplyCache | None
    stats: Stats
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: float = TIMEOUT_S
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    image_hash: ImageHashes = field(default_factory=ImageHashes)
    grace_s: float = GRACE_S
    limit: ConcurrencyLimit | None = None  # None: as many in flight as the stream runs
    first: FirstRequests = field(default_factory=lambda: FirstRequests())
    prices: Prices | None = None  # prices each reply paid for into stats.spent_usd
    max_cost: float | None = None
    # The most one request may cost (bv.stages.estimate.online_worst_case): reserved of `max_cost`
    # before it is sent, released when it ends, so replies in flight cannot overshoot the limit.
    worst_case: Callable[[list[dict[str, Any]]], float | None] | None = None
    _reserved: float = 0.0
    _holding: int = 0  # requests holding a reservation (a count: floats summed down drift off 0)
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    _in_flight: set[asyncio.Task] = field(default_factory=set)  # the tasks awaiting a request
    _abandoned: set[asyncio.Task] = field(default_factory=set)
    _watcher: asyncio.Task | None = None
    _backstop: Deadlines | None = None  # the engine's own timeout per try (made on first use)
    on_stop: str | None = None  # what a first Ctrl-C does, as said (None: bv.engine.stream's words)

    async def _abandon_after_stop(self) -> None:
        """After Ctrl-C and the grace period, give up the requests still in flight: each call
        raises Interrupted, so its stage can still write the row (the judge) or drop it (rollout)."""
        await self.stopping.wait()
        await asyncio.sleep(self.grace_s)
        for task in list(self._in_flight):
            self._abandoned.add(task)
            task.cancel()

    async def _send(self, messages: list[dict[str, Any]], params: dict[str, Any], run: int) -> Reply:
        """The backend's reply, awaited in the caller's own task (a task per request cost more
        than the rest of the engine's bookkeeping): abandoning a request cancels that task, and
        the cancellation is turned into Interrupted here unless the task itself is being cancelled."""
        if self._watcher is None:
            self._watcher = asyncio.ensure_future(self._abandon_after_stop())
        task = asyncio.current_task()
        assert task is not None
        self._in_flight.add(task)
        ticket = None
        try:
            if self.limit is not None:
                await self._paused()
                ticket = await self.limit.acquire()
            self.stats.sending()
            if self._backstop is None:
                self._backstop = Deadlines(self.timeout + BACKSTOP_S)
            try:
                # The backend's own timeouts name what timed out; this one is the backstop.
                with self._backstop.start():
                    reply = await self.backend.complete(messages, run=run, **params)
            except (NoReply, Unreachable, TimeoutError, asyncio.CancelledError):
                self.stats.sent(answered=False)
                raise
            except BaseException as exc:
                self.stats.sent(answered=True)
                if isinstance(exc, RateLimited) and ticket is not None:
                    self.limit.rate_limited(ticket)  # type: ignore[union-attr]
                raise
            self.stats.sent(answered=True)
            if ticket is not None:
                self.limit.succeeded(ticket)  # type: ignore[union-attr]
            return reply
        except asyncio.CancelledError:
            if task in self._abandoned and task.uncancel() == 0:
                raise Interrupted() from None
            raise  # this task itself is being cancelled, not just its request
        finally:
            if ticket is not None:
                self.limit.release()  # type: ignore[union-attr]
                self.stats.concurrency = self.limit.limit  # type: ignore[union-attr]
            self._in_flight.discard(task)
            self._abandoned.discard(task)

    def _key(self, messages: list[dict[str, Any]], params: dict[str, Any], run: int, turn: int) -> str | None:
        keys = self.prompt_keys(messages, params)
        return None if keys is None else keys(run, turn)

    def prompt_keys(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> RequestKey | None:
        """The cache keys of a prompt's requests by run and turn (None: no cache for this run)."""
        if self.cache is None or not self.backend.cacheable:
            return None
        try:
            return prompt_key(
                backend=self.backend.name,
                model=self.backend.model,
                endpoint=self.backend.cache_scope,
                messages=messages,
                params=params,
                image_hash=self.image_hash,
            )
        except ImageError as exc:  # not a regular file, over the size limit, unreadable
            raise ItemFailure(f"image: {exc}") from None

    @classmethod
    def for_run(
        cls, backend: Backend, settings: RunSettings, stats: Stats, stopping: asyncio.Event
    ) -> Caller:
        """A caller with the run's retry policy, timeout and cache (none for uncacheable backends)."""
        cache = ReplyCache(settings.cache_path) if settings.cache_path and backend.cacheable else None
        policy = RetryPolicy(retries=settings.retries, rate_limit_patience=settings.rate_limit_patience)
        stats.endpoint, stats.concurrency_most = backend.endpoint or backend.name, settings.jobs
        stats.priced, stats.cost_limit = settings.prices is not None, settings.max_cost
        return cls(
            backend,
            cache,
            stats,
            policy,
            settings.timeout,
            stopping,
            limit=ConcurrencyLimit(settings.jobs),
            prices=settings.prices,
            max_cost=settings.max_cost,
        )

    async def call(
        self,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        run: int = 0,
        turn: int = 0,
        keep: Callable[[Reply], bool] | None = None,
    ) -> tuple[Reply, bool]:
        """The reply to `messages`, and whether it came from the cache. A reply `keep` refuses is
        returned but not cached, so the next run asks again (the judge keeps only verdicts)."""
        key = self._key(messages, params, run, turn)
        if key is not None:
            cached = self.cached(key)
            if cached is not None:
                return cached, True
        try:
            reply = await self._tries(messages, params, run)
        except ItemFailure as exc:
            self.first.ended(exc)
            raise
        self.first.ended(None)
        reply.content = redaction.redact(reply.content)  # a server or proxy may echo a key
        if reply.reasoning is not None:
            reply.reasoning = redaction.redact(reply.reasoning)
        if reply.refusal is not None:
            reply.refusal = redaction.redact(reply.refusal)
        if key is not None and (keep is None or keep(reply)):
            made_at = endpoint_of(self.backend)
            self.cache.put(key, self.backend.name, self.backend.model, reply.to_json(), made_at)  # type: ignore[union-attr]
        self.stats.add_usage(reply.usage)
        if self.prices is not None:
            self._spend(reply)
        return reply, False

    def cached(self, key: str) -> Reply | None:
        """The cache's reply to a request, counted as a hit (and where it was made, when elsewhere)."""
        found = self.cache.get(key)  # type: ignore[union-attr]
        if found is None:
            return None
        self.stats.cache_hits += 1
        self.note_maker(found)
        return Reply.from_json(found)

    def note_maker(self, stored: Mapping[str, Any]) -> None:
        """Count a cached reply made at an endpoint this run does not send to (`made_elsewhere`)."""
        maker = stored.get("endpoint")
        if made_elsewhere(maker, self.backend):
            self.stats.elsewhere[maker] += 1

    def _spend(self, reply: Reply) -> None:
        """Add what a reply just paid for cost to the run's spend; once the cost limit is reached
        (or a reply's cost is unknown, so that it cannot be kept), no new request starts."""
        assert self.prices is not None
        where = first_url(self.backend.endpoint)
        cost = reply_cost(self.prices, reply.usage, self.backend.model, reply.model, endpoint=where)
        stats = self.stats
        stats.add_cost(cost.usd)
        limit = self.max_cost
        if limit is None or stats.limit_reached is not None:
            return
        if cost.usd is None:
            stats.limit_reached = (
                f"stopped: a reply's cost is {cost.source}, so the cost limit cannot be kept"
            )
        elif stats.spent_usd >= limit:
            stats.stop_at_cost_limit(limit)
        if stats.limit_reached is not None:
            self.stopping.set()

    async def _tries(self, messages: list[dict[str, Any]], params: dict[str, Any], run: int) -> Reply:
        """The backend's reply under the retry policy: `retries` more tries after other transient
        failures, and 429s borne for up to the policy's patience, counted from the first one."""
        attempt, limited, first_limited = 0, 0, 0.0
        while True:
            if self.stopping.is_set():
                raise Interrupted()
            held = await self._reserve(messages)
            self.stats.requests += 1
            try:
                return await self._send(messages, params, run)
            except TimeoutError:
                last: Transient = NoReply(f"timeout after {self.timeout:g} s")
            except Transient as exc:
                last = exc
            except (ItemFailure, Fatal, Interrupted):
                raise
            except Exception as exc:  # an unforeseen transport error: retry it like a transient one
                last = Transient(f"{type(exc).__name__}: {redaction.redact(str(exc))[:200]}")
            finally:  # a reply is counted in the spend before any other task runs (`call`)
                if held:
                    self._holding -= 1
                    self._reserved = self._reserved - held if self._holding else 0.0
                    self._released.set()
            if isinstance(last, RateLimited):
                self.stats.rate_limited += 1
                if last.retry_after is not None and self.limit is not None:
                    self.limit.pause(last.retry_after)  # the endpoint said wait: nobody sends meanwhile
                now = time.monotonic()
                first_limited = first_limited or now
                limited += 1
                left = self.policy.rate_limit_patience - (now - first_limited)
                if left <= 0:
                    raise ItemFailure(
                        f"{last.reason}: still refused after {duration(now - first_limited)} of retrying"
                        f" ({limited} tries; `rate_limit_patience` {self.policy.rate_limit_patience:g} s)"
                    )
                await self._wait(min(left, self.policy.delay(limited - 1, last.retry_after)), last.reason)
                continue
            if attempt == self.policy.retries:
                raise ItemFailure(f"{last.reason} (gave up after {self.policy.retries + 1} tries)")
            await self._wait(self.policy.delay(attempt, last.retry_after), last.reason)
            attempt += 1

    async def _reserve(self, messages: list[dict[str, Any]]) -> float:
        """Hold this request's worst case of what is left of the cost limit before it is sent:
        wait while requests in flight hold what it needs; stop the run (as at the limit) when it
        cannot fit even with none in flight."""
        if self.max_cost is None or self.worst_case is None:
            return 0.0
        worst = self.worst_case(messages)
        if worst is None or worst <= 0:  # free; or unpriced: its reply's unknown cost stops the run
            return 0.0
        stats = self.stats
        while stats.spent_usd + self._reserved + worst > self.max_cost:
            if not self._holding or self.stopping.is_set():
                if stats.limit_reached is None:
                    stats.stop_at_cost_limit(
                        self.max_cost, f"the next request could cost up to {dollars(worst)}"
                    )
                    self.stopping.set()
                raise Interrupted()
            self._released.clear()
            await self._released.wait()
        self._reserved += worst
        self._holding += 1
        return worst

    async def _paused(self) -> None:
        """Wait out the endpoint's pause (a 429's retry-after), if one is on, before sending: the
        wait a server asks of one request is its word for every request (bounded: each pause is at
        most BV_MAX_WAIT_S, and a wait ends once none is left)."""
        assert self.limit is not None
        for _ in range(64):  # a pause renewed while waiting is waited again, a bounded number of times
            left = self.limit.pause_left()
            if left <= 0:
                return
            await self._wait(left, "paused (retry-after)")

    async def _wait(self, seconds: float, reason: str) -> None:
        """Sleep before a retry, visibly (progress shows who waits and why), cut short by Ctrl-C."""
        self.stats.waiting[reason] += 1
        try:
            await asyncio.wait_for(self.stopping.wait(), timeout=seconds)
        except TimeoutError:
            return
        finally:
            self.stats.waiting[reason] -= 1
        raise Interrupted()


def made_elsewhere(maker: Any, backend: Backend) -> bool:
    """Whether a cached reply was made at none of the URLs this run sends to. Under the default
    `cache_scope` (model) the key names the model, not the endpoint: a proxy or replicas share
    its replies, and so would two servers that give two checkpoints one name (vLLM's
    --served-model-name, SGLang's `default`), which the run then says (`Stats.elsewhere_text`).
    A key that names the endpoint (`cache_scope` endpoint, Azure, an agent) was made there."""
    if maker.__class__ is not str or not maker or backend.cache_scope is not None:
        return False  # an older bv's reply says nowhere: nothing to compare
    return set(endpoint_of(backend).split()).isdisjoint(maker.split())


BACKSTOP_S = 5.0  # the engine's own timeout per try, beyond --timeout: the backend's fire first
SAME_FIRST_FAILURES = 3  # the first requests of a stage refused alike, this many, stop it


@dataclass
class FirstRequests:
    """Watches how a stage's first requests end: when the first `count` are all refused the same
    way (the same 4xx and message, the same agent failure), every other row would be too, so
    `stop` becomes the message the stage stops with, the refusal and its fix, instead of failing
    row after row. Any other ending (a reply, a failure of another kind) disarms it."""

    count: int = SAME_FIRST_FAILURES
    ended_: int = 0
    shape: str | None = None
    stop: str | None = None

    def ended(self, failure: ItemFailure | None) -> None:
        if self.ended_ >= self.count:
            return
        shape = _shape(str(failure)) if isinstance(failure, Refused) else None
        if shape is None or (self.shape is not None and shape != self.shape):
            self.ended_ = self.count  # disarmed: a reply, or failures that differ
            return
        self.shape, self.ended_ = shape, self.ended_ + 1
        if self.ended_ == self.count:
            fix = f" {failure.fix}" if isinstance(failure, Refused) and failure.fix else ""
            self.stop = (
                f"the first {self.count} requests were all refused the same way, so every row would"
                f" be: {failure}.{fix} The rows so far are written with their error; run the same"
                " command again once this is fixed"
            )


_VARYING = re.compile(r"\b(?:[0-9a-f]{8,}|\d[\d:.TZ-]{5,}\d)\b", re.IGNORECASE)


def _shape(message: str) -> str:
    """A failure's message without what varies between requests (ids, times, long numbers)."""
    return _VARYING.sub("#", message)


def run_stage(
    tasks: Iterable[T],
    work: Callable[[T], Awaitable[Mapping[str, Any] | None]],
    write: Callable[[Mapping[str, Any]], None],
    *,
    settings: RunSettings,
    stats: Stats,
    label: str,
    stopping: asyncio.Event,
    backend: Backend | None = None,
    caller: Caller | None = None,
    drain_on_interrupt: bool = False,
    replay: Replay | None = None,
    others: Sequence[Caller] = (),
) -> Outcome:
    """Run a whole request stage on a fresh event loop, with progress on stderr; stopped (Fatal)
    once `caller`'s first requests are all refused alike. However it ends, the reply cache is
    closed: its file alone then holds every reply (bv/engine/cache.py). `replay`: see
    bv.engine.stream. `others`: the callers of a stage's other endpoints (a panel of judges),
    closed with it."""
    halt = (lambda: caller.first.stop) if caller is not None else None

    async def go() -> Outcome:
        try:
            async with ProgressDisplay(
                stats,
                label,
                settings.quiet,
                stall_after_s=settings.stall_notice,
                silent_after_s=min(SILENT_AFTER_S, settings.stall_notice),
                limit_s=settings.timeout,
            ):
                return await run_stream(
                    tasks,
                    work,
                    write,
                    jobs=settings.jobs,
                    ordered=settings.ordered,
                    stopping=stopping,
                    drain_on_interrupt=drain_on_interrupt,
                    halt=halt,
                    limit=stats.stop_text,
                    on_stop=caller.on_stop if caller is not None else None,
                    replay=replay,
                )
        finally:
            if backend is not None:
                await backend.aclose()
            for other in others:
                await other.backend.aclose()

    try:
        with fewer_collections():
            return asyncio.run(go())
    finally:
        for each in (caller, *others):
            if each is not None and each.cache is not None:
                each.cache.close()


# Young objects collected every this many allocations while a stage runs (Python's default: 700).
# At -j 512 the default ran ~200 collections a run, 10-15% of bv's CPU; this runs ~10, and the
# cyclic garbage waiting for them is a few requests' worth.
GC_YOUNG_THRESHOLD = 10_000


_RAISED: list[tuple[int, int, int]] = []  # the thresholds found by the first running stage
_RAISED_LOCK = threading.Lock()
_RUNNING = [0]  # stages running in this process (bv.api may run several on threads at once)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect cyclic garbage less often while stages run; the first stage to start keeps the
    process's thresholds and the last to end restores them, however the stages overlap (bv.api
    runs stages inside its callers' processes)."""
    with _RAISED_LOCK:
        if _RUNNING[0] == 0:
            before = gc.get_threshold()
            _RAISED[:] = [before]
            gc.set_threshold(max(before[0], GC_YOUNG_THRESHOLD), *before[1:])
        _RUNNING[0] += 1
    try:
        yield
    finally:
        with _RAISED_LOCK:
            _RUNNING[0] -= 1
            if _RUNNING[0] == 0:
                gc.set_threshold(*_RAISED.pop())
