"""bv.engine.deadlines keeps the timeouts of many requests on one timer and behaves as
asyncio.timeout does: a deadline that passes is a TimeoutError in its block, any other
cancellation stays a cancellation, and a deadline stopped or left in time never fires."""

from __future__ import annotations

import asyncio
import time

from bv.engine.deadlines import Deadlines


def test_a_deadline_that_passes_is_a_timeout_and_the_others_run_on():
    async def main() -> list[str]:
        short, long = Deadlines(0.05), Deadlines(5.0)

        async def work(deadlines: Deadlines, seconds: float) -> str:
            started = time.monotonic()
            try:
                with deadlines.start():
                    await asyncio.sleep(seconds)
            except TimeoutError:
                return f"timeout after {time.monotonic() - started:.2f}"
            return "done"

        return await asyncio.gather(work(short, 1.0), work(short, 0.01), work(long, 0.2))

    first, second, third = asyncio.run(main())
    assert first.startswith("timeout after 0.0") and second == third == "done"


def test_one_timer_serves_every_deadline_in_flight():
    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        timers = []
        call_at = loop.call_at

        def counting(when, callback, *args, **kwargs):  # type: ignore[no-untyped-def]
            handle = call_at(when, callback, *args, **kwargs)
            if getattr(callback, "__self__", None) is deadlines:
                timers.append(handle)
            return handle

        loop.call_at = counting  # type: ignore[method-assign]
        deadlines = Deadlines(30.0)

        async def work() -> None:
            with deadlines.start():
                await asyncio.sleep(0.001)

        await asyncio.gather(*(work() for _ in range(2000)))
        return len(timers), len(deadlines._queue)

    timers, queued = asyncio.run(main())
    assert timers == 1 and queued <= 2000


def test_another_cancellation_stays_a_cancellation():
    async def main() -> str:
        deadlines = Deadlines(0.05)

        async def work() -> None:
            with deadlines.start():
                await asyncio.sleep(5)

        task = asyncio.ensure_future(work())
        await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "not cancelled"

    assert asyncio.run(main()) == "cancelled"


def test_a_stopped_deadline_never_fires():
    async def main() -> str:
        deadlines = Deadlines(0.05)
        with deadlines.start() as deadline:
            deadline.stop()
            await asyncio.sleep(0.15)
        return "expired" if deadline.expired else "ran on"

    assert asyncio.run(main()) == "ran on"


def test_finished_deadlines_behind_a_long_one_do_not_pile_up():
    async def main() -> int:
        deadlines = Deadlines(60.0)
        most = 0

        async def long() -> None:
            with deadlines.start():
                await asyncio.sleep(0.5)

        holder = asyncio.ensure_future(long())
        await asyncio.sleep(0)
        for _ in range(20_000):
            with deadlines.start():
                pass
            most = max(most, len(deadlines._queue))
        holder.cancel()
        return most

    assert asyncio.run(main()) < 100  # not 20,000


def test_each_event_loop_gets_its_own_timer():
    deadlines = Deadlines(0.05)

    async def main() -> bool:
        try:
            with deadlines.start():
                await asyncio.sleep(1)
        except TimeoutError:
            return True
        return False

    assert asyncio.run(main()) and asyncio.run(main())
