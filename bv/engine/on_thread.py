"""A stage run beside a running event loop (bv.api in a notebook, an async app): on a thread of its
own with its own event loop, since `asyncio.run` cannot be nested. Awaited (bv.api.arollout,
aevaluate, ...), a cancelled awaiting task stops it as a first Ctrl-C does; called plainly
(bv.api.evaluate in a Jupyter cell), the caller's thread waits for it, and a Ctrl-C there (a
notebook's interrupt) stops it the same way."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from bv.core.errors import Interrupted
from bv.core.outcome import STOP_REQUEST, StopRequest

T = TypeVar("T")


def loop_running() -> bool:
    """Whether this thread runs an event loop (a Jupyter cell, a coroutine) that bv's own cannot nest in."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _Worker:
    """`run(request)` on a thread of its own, its StopRequest in the thread's context (which the
    stage's loop inherits); `done` calls back once with the result or the error."""

    def __init__(self, name: str, run: Callable[[], Any], done: Callable[[Any, Any], None]) -> None:
        self.request = StopRequest()
        self.thread = threading.Thread(target=self._main, args=(name, run, done), name=f"bv-api-{name}")

    def _main(self, name: str, run: Callable[[], Any], done: Callable[[Any, Any], None]) -> None:
        STOP_REQUEST.set(self.request)
        result, error = None, None
        try:
            result = run()
        except Exception as exc:
            error = exc
        except BaseException as exc:  # never handed to the caller, whose loop would stop on it
            error = RuntimeError(f"bv.api.{name} ended on {exc!r}")
        done(result, error)


def beside_loop(name: str, run: Callable[[], T]) -> T:
    """`run` on a thread of its own, this thread waiting for it (a plain call inside a running event
    loop). A Ctrl-C while waiting asks the run to stop as a first Ctrl-C stops a command, waits for
    it (its paid replies cached), then raises Interrupted."""
    ended: list[tuple[Any, Any]] = []
    finished = threading.Event()  # not Thread.join: interrupted, it can take a live thread for ended

    def done(result: Any, error: Any) -> None:
        ended.append((result, error))
        finished.set()

    worker = _Worker(name, run, done)
    worker.thread.start()
    interrupted = False
    while not finished.is_set():
        try:
            finished.wait(0.1)  # a timeout, so that a Ctrl-C reaches this thread
        except KeyboardInterrupt:
            interrupted = True
            worker.request.ask()
    worker.thread.join()
    result, error = ended[0]
    if interrupted:
        raise Interrupted("interrupted by Ctrl-C; call again to resume from the cache", signal=signal.SIGINT)
    if error is not None:
        raise error
    return result


async def on_thread(name: str, run: Callable[[], T]) -> T:
    """Run `run` on a thread of its own and await it. When the awaiting task is cancelled, the
    run is asked to stop (bv.core.outcome.StopRequest: as a first Ctrl-C, quietly), and the
    cancellation goes on only once it has stopped: every paid reply cached, no thread left."""
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not ended.done():
            ended.set_result(result) if error is None else ended.set_exception(error)

    def done(result: Any, error: Any) -> None:
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the caller's loop has closed without waiting for us
            pass

    worker = _Worker(name, run, done)
    worker.thread.start()
    try:
        return await asyncio.shield(ended)
    except asyncio.CancelledError:
        worker.request.ask()
        await stopped(ended, worker.request)
        raise
    finally:
        worker.thread.join()  # settling `ended` was its last step


async def stopped(ended: asyncio.Future[Any], request: StopRequest) -> None:
    """Wait for a stage asked to stop (its grace period bounds the wait); a second cancellation
    does not cut the wait short, what the stage returns or raises is dropped."""
    while not ended.done():
        try:
            await asyncio.shield(ended)
        except asyncio.CancelledError:
            request.ask()
        except Exception:
            pass
    if not ended.cancelled():
        ended.exception()  # retrieved: superseded by the cancellation


class UntilStopped(list[Any]):
    """Records that stop being iterated once a stop is asked (an async variant, cancelled): the
    checks before a run, and the rules judge, which has no event loop to tell, end with it."""

    def __init__(self, rows: list[Any], request: StopRequest) -> None:
        super().__init__(rows)
        self.request = request

    def __iter__(self) -> Iterator[Any]:
        for row in super().__iter__():
            if self.request.asked:
                return
            yield row
