"""A stage awaited from async code (bv.api.arollout, ajudge): run on a thread of its own with its
own event loop, stopped as by a first Ctrl-C when the awaiting task is cancelled."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

from bv.core.outcome import STOP_REQUEST, StopRequest


async def on_thread(stage: Callable[..., list[Any]], records: list[Any], options: dict[str, Any]) -> Any:
    """Run a stage on a thread of its own and await it. When the awaiting task is cancelled, the
    stage is asked to stop (bv.core.outcome.StopRequest: as a first Ctrl-C, quietly), and the
    cancellation goes on only once it has stopped: every paid reply cached, no thread left."""
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[Any] = loop.create_future()
    request = StopRequest()

    def settle(result: Any, error: BaseException | None) -> None:
        if not ended.done():
            ended.set_result(result) if error is None else ended.set_exception(error)

    def run() -> None:
        STOP_REQUEST.set(request)  # this thread's context, which the stage's loop inherits
        result, error = None, None
        try:
            result = stage(UntilStopped(records, request), **options)
        except Exception as exc:
            error = exc
        except BaseException as exc:  # never handed to the caller's loop, which would stop on it
            error = RuntimeError(f"bv.api.{stage.__name__} ended on {exc!r}")
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the caller's loop has closed without waiting for us
            pass

    thread = threading.Thread(target=run, name=f"bv-api-{stage.__name__}")
    thread.start()
    try:
        return await asyncio.shield(ended)
    except asyncio.CancelledError:
        request.ask()
        await stopped(ended, request)
        raise
    finally:
        thread.join()  # settling `ended` was its last step


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
