"""Running a stage's work over a stream of tasks: a reader, bounded concurrency, a writer.

`run_stream` keeps `jobs` tasks in flight over a lazily read input (a reader thread feeds the
event loop, so a slow upstream stage never stalls requests in flight), writes each finished row
at once (or in input order with `ordered`), and turns Ctrl-C, SIGTERM, a closed stdout or a
fatal backend error into a clean stop that never loses or duplicates a finished row.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

from bv.core import environment, redaction
from bv.core.errors import Fatal, Interrupted, StdoutClosed
from bv.core.outcome import SIGNAL_NAMES, Outcome, loop_signals, prefix, requested_stops, say
from bv.core.run_context import current, in_this_context
from bv.core.terminal import printable

T = TypeVar("T")
Replay = Callable[[list[Any]], list[Mapping[str, Any] | None]]  # tasks -> their rows, or None each
REPLAY_BATCH = 256  # with a replay, tasks read ahead of the workers at least
GRACE_S = 10.0  # after Ctrl-C or SIGTERM, how long requests in flight may still finish
_DONE = object()  # the reader's end-of-input marker


async def run_stream(
    tasks: Iterable[T],
    work: Callable[[T], Awaitable[Mapping[str, Any] | None]],
    write: Callable[[Mapping[str, Any]], None],
    *,
    jobs: int,
    ordered: bool = False,
    stopping: asyncio.Event | None = None,
    drain_on_interrupt: bool = False,
    grace_s: float = GRACE_S,
    halt: Callable[[], str | None] | None = None,
    limit: Callable[[], str | None] | None = None,
    on_stop: str | None = None,
    replay: Replay | None = None,
) -> Outcome:
    """Run `work` over `tasks` with `jobs` in flight and `write` each result as it finishes
    (see StreamRun); once `halt` returns a message, after the row that made it say so is
    written, the run stops as for a Fatal error with that message; once `limit` does (the cost
    limit reached), it stops as on a first Ctrl-C, saying why. `on_stop`: what a first stop
    does, as it is said (default: the requests in flight get the grace period). `replay`: see
    StreamRun."""
    run = StreamRun(
        tasks,
        work,
        write,
        jobs=jobs,
        ordered=ordered,
        stopping=stopping or asyncio.Event(),
        drain_on_interrupt=drain_on_interrupt,
        grace_s=grace_s,
        halt=halt,
        limit=limit,
        on_stop=on_stop,
        replay=replay,
    )
    return await run.run()


class StreamRun:
    """One run of `work` over `tasks`: a reader thread, `jobs` workers and a writer.

    The reader pulls tasks from the (possibly blocking) input and hands them to the event loop,
    at most 2 x jobs ahead of the workers. Each worker takes a task, awaits `work` on it and hands
    the row to the writer, which writes it at once, or with `ordered` in input order (workers stay
    within `window` tasks of the oldest unwritten one, so memory stays bounded).

    The first Ctrl-C or SIGTERM sets `stopping`: no new request starts. By default reading stops
    too, requests in flight get `grace_s` to finish, and what finished is written. With
    `drain_on_interrupt` (a downstream stage such as judge) the input is still read to its end, so
    rows that need no request keep flowing. A second signal quits at once.

    With `replay`, the tasks read go to it first, in the batches the reader handed over: it
    returns the row of each task it could make without `work` (the rollout's rows the reply
    cache answers, bv.stages.replay), or None; those rows are written as a worker's would be,
    and the other tasks go to the workers. One call a batch, not a worker's turn a row.
    """

    def __init__(
        self,
        tasks: Iterable[T],
        work: Callable[[T], Awaitable[Mapping[str, Any] | None]],
        write: Callable[[Mapping[str, Any]], None],
        *,
        jobs: int,
        ordered: bool,
        stopping: asyncio.Event,
        drain_on_interrupt: bool,
        grace_s: float,
        halt: Callable[[], str | None] | None = None,
        limit: Callable[[], str | None] | None = None,
        on_stop: str | None = None,
        replay: Replay | None = None,
    ) -> None:
        self.tasks, self.work, self.write = tasks, work, write
        self.on_stop = on_stop or f"finishing requests in flight for up to {grace_s:g} s"
        self.replay = replay
        self.arrived: list[Any] = []  # with `replay`: tasks delivered, not yet replayed
        self.arrival = asyncio.Event()
        self.replay_failed = False
        self.limit = limit
        self.jobs, self.ordered, self.grace_s = jobs, ordered, grace_s
        self.stopping = stopping  # no new requests (shared with the Caller)
        self.drain_on_interrupt = drain_on_interrupt
        self.halt = halt
        self.finishing = asyncio.Event()  # workers take no new tasks; those in flight get the grace
        self.outcome = Outcome()
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        # Tasks read ahead of the workers, at most: 2 x jobs; with a replay, at least a batch worth
        # a lookup (a replay at -j 8 took 16 rows a batch, a hand-over between threads each).
        ahead = max(2 * jobs, REPLAY_BATCH) if replay is not None else 2 * jobs
        self.slots = threading.Semaphore(ahead)
        self.taken = 0  # tasks taken by workers whose slots are not yet given back
        self.batch = max(1, ahead // 4)  # slots are given back this many at a time
        self.inbox: deque[Any] = deque()  # tasks read, on their way to the event loop
        self.waking = False  # a hand-over of the inbox to the event loop is pending
        self.stop_reading = threading.Event()
        self.window = max(4 * jobs, 64)  # with `ordered`: how far ahead of the writer a worker may be
        self.next_seq = 0  # with `ordered`: the next row to write
        self.pending: dict[int, Mapping[str, Any] | None] = {}  # finished rows waiting for their turn
        self.turn = asyncio.Condition()
        self.reader_failure: BaseException | None = None
        self.workers: list[asyncio.Task] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self.context = current()  # the run this one belongs to (its hard stop, its secrets)

    async def run(self) -> Outcome:
        self.loop = asyncio.get_running_loop()
        self.workers = [asyncio.create_task(self.worker()) for _ in range(self.jobs)]
        if self.replay is not None:
            self.workers.append(asyncio.create_task(self.replaying()))
        with loop_signals(self.loop, self.on_signal), requested_stops(self.loop, self.cancel):
            threading.Thread(target=in_this_context(self.read), name="bv-reader", daemon=True).start()
            try:
                await self.supervise()
            except StdoutClosed:
                self.outcome.stdout_closed = True
            except Fatal as exc:
                self.outcome.fatal = str(exc)
            finally:
                await self.stop()
        if self.outcome.stopped is not None and self.limit is not None:
            self.outcome.stopped = self.limit() or self.outcome.stopped  # the spend as the run ended
        if self.reader_failure is not None:
            raise self.reader_failure
        return self.outcome

    def read(self) -> None:
        """The reader thread: pull tasks from the input and hand them to the workers' queue."""
        assert self.loop is not None
        try:
            for seq, task in enumerate(self.tasks):
                while not self.slots.acquire(timeout=0.25):
                    if self.stop_reading.is_set():
                        return
                if self.stop_reading.is_set():
                    return
                self._post((seq, task))
        except BaseException as exc:  # handed to the event loop, which re-raises it
            self._post((_DONE, exc))
            return
        self._post((_DONE, None))

    def _post(self, item: Any) -> None:
        """Hand a task to the event loop: through the inbox, waking the loop only when no
        hand-over is pending (one wake-up, a system call, for all the tasks read meanwhile)."""
        self.inbox.append(item)
        if self.waking:
            return
        self.waking = True
        try:
            self.loop.call_soon_threadsafe(self._deliver)  # type: ignore[union-attr]
        except RuntimeError:  # the loop already closed: the run ended while we were reading
            pass

    def _deliver(self) -> None:
        """On the event loop: move what the reader read into the workers' queue."""
        self.waking = False  # before taking: a task the reader adds from now on wakes the loop again
        if self.replay is not None:
            while self.inbox:
                self.arrived.append(self.inbox.popleft())
            self.arrival.set()
            return
        while self.inbox:
            self.queue.put_nowait(self.inbox.popleft())

    async def worker(self) -> None:
        """Take tasks until the input ends or the run finishes; each row goes to the writer."""
        while not self.finishing.is_set():
            seq, task = await self.queue.get()
            if seq is _DONE:
                self.queue.put_nowait((_DONE, task))  # let the other workers see the end too
                if task is not None:
                    self.reader_failure = task
                return
            self._took()
            if self.ordered:
                async with self.turn:
                    await self.turn.wait_for(partial(self.in_window, seq))
            await self.emit(seq, await self.do(seq, task))
            stop = self.halt() if self.halt is not None else None
            if stop is not None:
                raise Fatal(stop)
            reached = self.limit() if self.limit is not None else None
            if reached is not None and self.outcome.signal is None:
                self.on_limit(reached)

    def _took(self) -> None:
        """A task read has left the read-ahead: its slot goes back to the reader."""
        self.taken += 1
        if self.taken >= self.batch:  # the reader, waiting, wakes once per batch, not per task
            self.slots.release(self.taken)
            self.taken = 0

    async def replaying(self) -> None:
        """With `replay`: each batch delivered goes through it; the tasks it made no row for go
        to the workers first, then its rows are written (with `ordered`, each in its turn)."""
        assert self.replay is not None
        while not self.finishing.is_set():
            await self.arrival.wait()
            self.arrival.clear()
            batch, self.arrived = self.arrived, []
            if self.finishing.is_set():
                return
            ending = batch[-1] if batch and batch[-1][0] is _DONE else None
            tasks = batch[:-1] if ending is not None else batch
            rows = self._replayed([task for _, task in tasks])
            for (seq, task), row in zip(tasks, rows, strict=True):
                if row is None:
                    self.queue.put_nowait((seq, task))
            for (seq, _), row in zip(tasks, rows, strict=True):
                if row is not None:
                    self._took()
                    if self.ordered:
                        async with self.turn:
                            await self.turn.wait_for(partial(self.in_window, seq))
                    await self.emit(seq, row)
            if ending is not None:
                self.queue.put_nowait(ending)
                return

    def _replayed(self, tasks: list[Any]) -> list[Mapping[str, Any] | None]:
        """`replay`'s rows for a batch; after a bug in it (said once), every task goes to the workers."""
        assert self.replay is not None
        if self.replay_failed or not tasks:
            return [None] * len(tasks)
        try:
            return self.replay(tasks)
        except Exception as exc:
            if environment.debug():
                raise
            self.replay_failed = True
            say(f"replaying from the cache failed ({type(exc).__name__}); every row goes the usual way")
            return [None] * len(tasks)

    def in_window(self, seq: int) -> bool:
        """Whether task `seq` may start: the window of ordered output would not outgrow its bound."""
        return seq < self.next_seq + self.window

    async def do(self, seq: int, task: Any) -> Mapping[str, Any] | None:
        """The row for one task; None when it is unfinished (Ctrl-C) or broken (a bug)."""
        try:
            return await self.work(task)
        except Interrupted:
            return None  # unfinished: not written, redone by the next run
        except (Fatal, StdoutClosed):
            raise
        except Exception as exc:  # a bug must cost its row, not the run
            if environment.debug():
                raise
            self.outcome.broken_rows += 1
            sys.stderr.write(
                f"{prefix()} error: input row {seq + 1} could not be processed and is left out"
                f" ({type(exc).__name__}: {printable(redaction.redact(str(exc)), 200)}; BV_DEBUG=1 shows"
                " a traceback)\n"
            )
            return None

    async def emit(self, seq: int, row: Mapping[str, Any] | None) -> None:
        """The writer: write a finished row (None: nothing to write), in input order when `ordered`."""
        if not self.ordered:
            if row is not None:
                self.write(row)
            return
        async with self.turn:
            self.pending[seq] = row
            while self.next_seq in self.pending:
                ready = self.pending.pop(self.next_seq)
                if ready is not None:
                    self.write(ready)
                self.next_seq += 1
            self.turn.notify_all()

    def on_signal(self, signum: int) -> None:
        """The first Ctrl-C or SIGTERM stops the run gently; a second one quits now."""
        if self.outcome.signal is not None:
            # Cancel what runs (an exec agent's process group is killed on cancellation) and
            # end; the run's hard stop (the command line's) may also end the process.
            say("interrupted again; quitting now")
            for task in self.workers:
                task.cancel()
            if self.context.hard_stop is not None:
                self.context.hard_stop(signum)
            return
        self.outcome.signal = signum
        self.stopping.set()
        name = SIGNAL_NAMES.get(signum, "a signal")
        if self.drain_on_interrupt:
            say(
                f"interrupted by {name}; no new requests, passing on the rest of the input"
                " (Ctrl-C again to quit now)"
            )
            return
        self.finish()
        say(f"interrupted by {name}; {self.on_stop} (Ctrl-C again to quit now)")

    def on_limit(self, reason: str) -> None:
        """A limit reached (the cost limit) stops the run as a first Ctrl-C does, saying why; the
        run counts as interrupted (`signal` SIGINT's), so nothing takes it for a finished one."""
        self.outcome.signal, self.outcome.stopped = signal.SIGINT, reason
        self.stopping.set()
        if self.drain_on_interrupt:
            say(f"{reason}; no new requests, passing on the rest of the input")
            return
        self.finish()
        say(f"{reason}; {self.on_stop}")

    def finish(self) -> None:
        """Start no new task: reading stops, idle workers leave, busy ones get the grace period."""
        self.finishing.set()
        self.stop_reading.set()
        self.arrival.set()  # the replay, waiting for tasks, ends
        for _ in self.workers:  # wake idle workers, so only the busy ones are waited for
            self.queue.put_nowait((_DONE, None))

    def cancel(self) -> None:
        """A stop asked from Python (bv.api, its awaiting task cancelled): as a first Ctrl-C, but
        quietly and without passing on the rest of the input, since the caller takes no more rows."""
        if not self.finishing.is_set():
            self.stopping.set()
            self.finish()

    async def supervise(self) -> None:
        """Wait for the workers; after a stop, give those in flight the grace period, then go on."""
        pending = set(self.workers)
        stop_wait = asyncio.ensure_future(self.finishing.wait())
        try:
            while pending:
                done, rest = await asyncio.wait(pending | {stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                pending = rest - {stop_wait}
                _raise_failures(done - {stop_wait})
                if stop_wait in done and pending:
                    done, _ = await asyncio.wait(pending, timeout=self.grace_s)
                    _raise_failures(done)
                    return
        finally:
            stop_wait.cancel()

    async def stop(self) -> None:
        """End the run: the reader and workers stop; rows that finished behind one cut short by
        the stop are still written, in order."""
        self.stop_reading.set()
        self.stopping.set()
        self.finishing.set()  # a worker whose cancellation is swallowed (3.11's wait_for) still ends
        for task in self.workers:
            task.cancel()
        await asyncio.gather(*self.workers, return_exceptions=True)
        if not self.pending or self.outcome.stdout_closed:
            return
        try:
            for seq in sorted(self.pending):
                row = self.pending.pop(seq)
                if row is not None:
                    self.write(row)
        except StdoutClosed:
            self.outcome.stdout_closed = True


def _raise_failures(tasks: set[asyncio.Task]) -> None:
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
