"""The request engine shared by rollout and judge: concurrency, retries, cache, Ctrl-C.

`Caller.call` sends one chat request the way every bv stage does: look in the cache, else
try the backend under the retry policy with a per-try timeout, store the reply. `run_stream`
keeps `jobs` tasks in flight over a lazily read input (a reader thread feeds the event loop,
so a slow upstream stage never stalls requests in flight), writes each finished row at once
(or in input order with `ordered`), and turns Ctrl-C, a closed stdout or a fatal backend
error into a clean stop that never loses or duplicates a finished row.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bv import secrets
from bv.backends import Backend, Reply
from bv.cache import ImageHashes, ReplyCache, request_key
from bv.errors import Fatal, ItemFailure, StdoutClosed, Transient
from bv.progress import ProgressDisplay, Stats
from bv.retry import RetryPolicy

T = TypeVar("T")
GRACE_S = 10.0  # after Ctrl-C, how long requests in flight may still finish


class Interrupted(Exception):
    """The run is stopping (Ctrl-C); the item did not finish and will be redone next time."""


@dataclass(frozen=True)
class RunSettings:
    """How a request stage (rollout, judge) runs; set from the command line."""

    jobs: int = 8
    retries: int = 5
    timeout_s: float = 600.0
    cache_path: Path | None = None  # None: no cache
    quiet: bool = False
    ordered: bool = False


@dataclass
class Caller:
    """Sends chat requests to one backend with the cache, the retry policy and a timeout."""

    backend: Backend
    cache: ReplyCache | None
    stats: Stats
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: float = 600.0
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    image_hash: ImageHashes = field(default_factory=ImageHashes)
    grace_s: float = GRACE_S
    _in_flight: set[asyncio.Future] = field(default_factory=set)
    _watcher: asyncio.Task | None = None

    async def _abandon_after_stop(self) -> None:
        """After Ctrl-C and the grace period, give up the requests still in flight: each call
        raises Interrupted, so its stage can still write the row (the judge) or drop it (rollout)."""
        await self.stopping.wait()
        await asyncio.sleep(self.grace_s)
        for request in list(self._in_flight):
            request.cancel()

    async def _send(self, messages: list[dict[str, Any]], params: dict[str, Any], run: int) -> Reply:
        if self._watcher is None:
            self._watcher = asyncio.ensure_future(self._abandon_after_stop())
        request = asyncio.ensure_future(self.backend.complete(messages, run=run, **params))
        self._in_flight.add(request)
        try:
            async with asyncio.timeout(self.timeout_s):
                return await request
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this task itself is being cancelled, not just its request
            raise Interrupted() from None
        finally:
            self._in_flight.discard(request)
            request.cancel()  # on a timeout or our own cancellation: the backend call ends too

    def _key(self, messages: list[dict[str, Any]], params: dict[str, Any], run: int, turn: int) -> str | None:
        if self.cache is None or not self.backend.cacheable:
            return None
        try:
            return request_key(
                backend=self.backend.name,
                model=self.backend.model,
                endpoint=self.backend.endpoint,
                messages=messages,
                params=params,
                run=run,
                turn=turn,
                image_hash=self.image_hash,
            )
        except OSError as exc:
            raise ItemFailure(f"image: {exc.strerror or exc}") from None

    @classmethod
    def for_run(
        cls, backend: Backend, settings: RunSettings, stats: Stats, stopping: asyncio.Event
    ) -> Caller:
        """A caller with the run's retry policy, timeout and cache (none for uncacheable backends)."""
        cache = ReplyCache(settings.cache_path) if settings.cache_path and backend.cacheable else None
        return cls(backend, cache, stats, RetryPolicy(retries=settings.retries), settings.timeout_s, stopping)

    async def call(
        self, messages: list[dict[str, Any]], params: dict[str, Any], run: int = 0, turn: int = 0
    ) -> tuple[Reply, bool]:
        """The reply to `messages`, and whether it came from the cache."""
        key = self._key(messages, params, run, turn)
        if key is not None:
            cached = self.cache.get(key)  # type: ignore[union-attr]
            if cached is not None:
                self.stats.cache_hits += 1
                return Reply.from_json(cached), True
        last: Transient | None = None
        for attempt in range(self.policy.retries + 1):
            if self.stopping.is_set():
                raise Interrupted()
            self.stats.requests += 1
            try:
                reply = await self._send(messages, params, run)
            except TimeoutError:
                last = Transient(f"timeout after {self.timeout_s:g} s")
            except Transient as exc:
                last = exc
            except (ItemFailure, Fatal, Interrupted):
                raise
            except Exception as exc:  # an unforeseen transport error: retry it like a transient one
                last = Transient(f"{type(exc).__name__}: {secrets.redact(str(exc))[:200]}")
            else:
                reply.content = secrets.redact(reply.content)  # a server or proxy may echo a key
                if key is not None:
                    self.cache.put(key, self.backend.name, self.backend.model, reply.to_json())  # type: ignore[union-attr]
                self.stats.add_usage(reply.usage)
                return reply, False
            if attempt == self.policy.retries:
                break
            await self._wait(self.policy.delay(attempt, last.retry_after), last.reason)
        assert last is not None
        raise ItemFailure(f"{last.reason} (gave up after {self.policy.retries + 1} tries)")

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


@dataclass
class Outcome:
    """How a run ended: normally, interrupted (exit 130), stdout closed, or a fatal error."""

    interrupted: bool = False
    stdout_closed: bool = False
    fatal: str | None = None
    broken_rows: int = 0  # rows skipped on an unexpected error (a bug), each said on stderr


_DONE = object()


def run_stage(
    tasks: Iterable[T],
    work: Callable[[T], Awaitable[dict[str, Any] | None]],
    write: Callable[[dict[str, Any]], None],
    *,
    settings: RunSettings,
    stats: Stats,
    label: str,
    stopping: asyncio.Event,
    backend: Backend | None = None,
    drain_on_interrupt: bool = False,
) -> Outcome:
    """Run a whole request stage on a fresh event loop, with progress on stderr."""

    async def go() -> Outcome:
        try:
            async with ProgressDisplay(stats, label, settings.quiet):
                return await run_stream(
                    tasks,
                    work,
                    write,
                    jobs=settings.jobs,
                    ordered=settings.ordered,
                    stopping=stopping,
                    drain_on_interrupt=drain_on_interrupt,
                )
        finally:
            if backend is not None:
                await backend.aclose()

    return asyncio.run(go())


async def run_stream(
    tasks: Iterable[T],
    work: Callable[[T], Awaitable[dict[str, Any] | None]],
    write: Callable[[dict[str, Any]], None],
    *,
    jobs: int,
    ordered: bool = False,
    stopping: asyncio.Event | None = None,
    drain_on_interrupt: bool = False,
    grace_s: float = GRACE_S,
) -> Outcome:
    """Run `work` over `tasks` with `jobs` in flight and `write` each result as it finishes.

    The first Ctrl-C sets `stopping`: no new request starts. By default reading stops too,
    requests in flight get `grace_s` to finish, and what finished is written. With
    `drain_on_interrupt` (a downstream stage such as judge) the input is still read to its
    end, so rows that need no request keep flowing. A second Ctrl-C exits at once.
    """
    loop = asyncio.get_running_loop()
    stopping = stopping or asyncio.Event()
    finishing = asyncio.Event()  # stop taking tasks; in-flight ones get the grace period
    outcome = Outcome()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    slots = threading.Semaphore(2 * jobs)  # tasks read ahead of the workers, at most
    stop_reading = threading.Event()

    def feed() -> None:
        """Reader thread: pull tasks from the (possibly blocking) input and hand them over."""
        try:
            for seq, task in enumerate(tasks):
                while not slots.acquire(timeout=0.25):
                    if stop_reading.is_set():
                        return
                if stop_reading.is_set():
                    return
                loop.call_soon_threadsafe(queue.put_nowait, (seq, task))
        except BaseException as exc:  # handed to the event loop, which re-raises it
            _post(loop, queue, (_DONE, exc))
            return
        _post(loop, queue, (_DONE, None))

    window = max(4 * jobs, 64)
    next_seq = 0
    pending: dict[int, dict[str, Any] | None] = {}
    turn = asyncio.Condition()
    failure: list[BaseException] = []

    async def emit(seq: int, row: dict[str, Any] | None) -> None:
        """Write a finished row (None: nothing to write), in input order when `ordered`."""
        nonlocal next_seq
        if not ordered:
            if row is not None:
                write(row)
            return
        async with turn:
            pending[seq] = row
            while next_seq in pending:
                ready = pending.pop(next_seq)
                if ready is not None:
                    write(ready)
                next_seq += 1
            turn.notify_all()

    async def worker() -> None:
        while not finishing.is_set():
            seq, task = await queue.get()
            if seq is _DONE:
                queue.put_nowait((_DONE, task))  # let the other workers see the end too
                if task is not None:
                    failure.append(task)
                return
            slots.release()
            if ordered:
                async with turn:
                    await turn.wait_for(lambda seq=seq: seq < next_seq + window)
            try:
                row = await work(task)
            except Interrupted:
                row = None  # unfinished: not written, redone by the next run
            except (Fatal, StdoutClosed):
                raise
            except Exception as exc:  # a bug must cost its row, not the run
                if os.environ.get("BV_DEBUG"):
                    raise
                outcome.broken_rows += 1
                row = None
                sys.stderr.write(
                    f"bv: error: input row {seq + 1} could not be processed and is left out"
                    f" ({type(exc).__name__}: {secrets.redact(str(exc))[:200]}; BV_DEBUG=1 shows"
                    " a traceback)\n"
                )
            await emit(seq, row)

    workers = [asyncio.create_task(worker()) for _ in range(jobs)]
    interrupts = 0

    def on_sigint() -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1:
            # Cancel what runs (an exec agent's process group is killed on cancellation) and
            # end; if anything still lingers a moment later, leave without waiting for it.
            sys.stderr.write("bv: interrupted again; quitting now\n")
            for task in workers:
                task.cancel()
            loop.call_later(1.0, os._exit, 130)
            return
        outcome.interrupted = True
        stopping.set()
        if drain_on_interrupt:
            sys.stderr.write(
                "bv: interrupted; no new requests, passing on the rest of the input"
                " (Ctrl-C again to quit now)\n"
            )
            return
        finishing.set()
        stop_reading.set()
        for _ in workers:  # wake idle workers, so only the busy ones are waited for
            queue.put_nowait((_DONE, None))
        sys.stderr.write(
            f"bv: interrupted; finishing requests in flight for up to {grace_s:g} s"
            " (Ctrl-C again to quit now)\n"
        )

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    threading.Thread(target=feed, name="bv-reader", daemon=True).start()
    try:
        await _supervise(workers, finishing, grace_s)
    except StdoutClosed:
        outcome.stdout_closed = True
    except Fatal as exc:
        outcome.fatal = str(exc)
    finally:
        stop_reading.set()
        stopping.set()
        finishing.set()  # a worker whose cancellation is swallowed (3.11's wait_for) still ends
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        loop.remove_signal_handler(signal.SIGINT)
        if pending and not outcome.stdout_closed:
            # Rows that finished behind one cut short by the stop: still written, in order.
            try:
                for seq in sorted(pending):
                    if pending[seq] is not None:
                        write(pending.pop(seq))  # type: ignore[arg-type]
            except StdoutClosed:
                outcome.stdout_closed = True
    if failure:
        raise failure[0]
    return outcome


async def _supervise(workers: list[asyncio.Task], stopping: asyncio.Event, grace_s: float) -> None:
    """Wait for the workers; after a stop, give those in flight `grace_s` before cancelling them."""
    pending = set(workers)
    stop_wait = asyncio.ensure_future(stopping.wait())
    try:
        while pending:
            done, rest = await asyncio.wait(pending | {stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            pending = rest - {stop_wait}
            _raise_failures(done - {stop_wait})
            if stop_wait in done and pending:
                done, _ = await asyncio.wait(pending, timeout=grace_s)
                _raise_failures(done)
                return
    finally:
        stop_wait.cancel()


def _raise_failures(tasks: set[asyncio.Task]) -> None:
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


def _post(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue, item: Any) -> None:
    try:
        loop.call_soon_threadsafe(queue.put_nowait, item)
    except RuntimeError:  # the loop already closed: the run ended while we were reading
        pass
