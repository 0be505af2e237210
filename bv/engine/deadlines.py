"""Timeouts for many requests in flight at once, kept by one timer of the event loop.

`asyncio.timeout` makes a timer per use, and each timer is pushed onto and popped off the event
loop's heap, whose comparisons are Python calls: with 512 requests in flight that cost ~14 us a
timeout, and bv used three a request (the engine's backstop, the first byte, the read). The
timeouts of one kind all last as long, so their deadlines come in the order they are started:
`Deadlines` keeps them in a queue and sets one timer, for the oldest still running; a finished
one is only marked, and dropped when it reaches the front. A deadline that passes cancels its
task, which its `with` block turns into TimeoutError, as `asyncio.timeout` does.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType


class Deadline:
    """One task's deadline: `with deadline:` around what it bounds; `stop()` ends it early."""

    __slots__ = ("_owner", "cancelling", "done", "expired", "task", "when")

    def __init__(self, owner: Deadlines, when: float, task: asyncio.Task) -> None:
        self.when, self.task, self._owner = when, task, owner
        self.cancelling = task.cancelling()  # cancellations asked before this deadline began
        self.done = self.expired = False

    def __enter__(self) -> Deadline:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        # The cancellation this deadline asked for, and no other since: it is a timeout.
        if self.expired and self.task.uncancel() <= self.cancelling and kind is asyncio.CancelledError:
            raise TimeoutError from exc

    def stop(self) -> None:
        """No longer bound by this deadline (its work is done, or the next phase has its own)."""
        if not self.done:
            self.done = True
            self._owner.live -= 1


class Deadlines:
    """Deadlines of `seconds` from their start, for the tasks of one event loop."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.live = 0  # deadlines started and not yet stopped
        self._queue: deque[Deadline] = deque()  # in the order of `when`
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> Deadline:
        """A deadline `seconds` from now for the task running now."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline needs a task")
        if loop is not self._loop:  # a new run (bv.api runs each stage on a loop of its own)
            self._loop, self._queue, self._timer, self.live = loop, deque(), None, 0
        deadline = Deadline(self, loop.time() + self.seconds, task)
        queue = self._queue
        while queue and queue[0].done:
            queue.popleft()
        if len(queue) > 2 * self.live + 64:  # behind a long-running one, the finished pile up
            self._queue = queue = deque(d for d in queue if not d.done)
        queue.append(deadline)
        self.live += 1
        if self._timer is None:
            self._timer = loop.call_at(queue[0].when, self._expire)
        return deadline

    def expire_all(self) -> None:
        """Run out every live deadline now (their server was found hung: none need wait theirs)."""
        for deadline in self._queue:
            if not deadline.done:
                deadline.expired = True
                deadline.stop()
                deadline.task.cancel()

    def _expire(self) -> None:
        """The timer: cancel the tasks whose deadline passed, then wait for the next live one."""
        assert self._loop is not None
        self._timer = None
        now = self._loop.time()
        queue = self._queue
        while queue:
            head = queue[0]
            if not head.done and head.when > now:
                self._timer = self._loop.call_at(head.when, self._expire)
                return
            queue.popleft()
            if not head.done:
                head.expired = True
                head.stop()
                head.task.cancel()
