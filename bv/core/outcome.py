"""How a stage's run went (`Outcome`), its messages on stderr, and how a run is asked to stop.

A run stops gently on the first Ctrl-C or SIGTERM while its event loop runs (`loop_signals`), or
when its `StopRequest` is asked (bv.api, its awaiting task cancelled): no new requests, those in
flight get the grace period, finished rows are written. What that means for the process (exit
statuses, the closing summary, quitting on a second signal) is bv.cli's (bv.cli.ending).
"""

from __future__ import annotations

import contextlib
import contextvars
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bv.core.run_context import current, worded
from bv.core.terminal import printable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SIGNAL_NAMES: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


def prefix() -> str:
    """How a message starts: `bv rollout:` (the current run's stage), or `bv:` before one is known."""
    stage = current().stage
    return f"bv {stage}:" if stage else "bv:"


def say(message: str) -> None:
    """One line on stderr naming the stage, in the run's words. While a progress bar shows, rich's
    redirect of stderr prints it above the bar; the closing summary comes after the bar is gone."""
    try:
        sys.stderr.write(printable(f"{prefix()} {worded(message)}") + "\n")  # data in it never acts
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


@contextlib.contextmanager
def loop_signals(loop: Any, on_signal: Callable[[int], None]) -> Iterator[None]:
    """While an event loop runs a stage: Ctrl-C and SIGTERM call `on_signal(signum)`, then
    the handlers from before come back."""
    if threading.current_thread() is not threading.main_thread():  # bv.arollout's worker thread
        yield  # only the main thread can take signals: Ctrl-C is the calling program's
        return
    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            loop.remove_signal_handler(signum)
            if handler is not None:
                signal.signal(signum, handler)


class StopRequest:
    """A stop asked from another thread: bv.api's async variants ask it when the task awaiting
    them is cancelled. The run in progress in this context (bv.engine.stream) is told on its own loop;
    a stop asked before the run starts stops it as soon as it starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.asked = False
        self._target: tuple[Any, Callable[[], None]] | None = None  # (loop, stop) of the run

    def ask(self) -> None:
        with self._lock:
            self.asked, target = True, self._target
        if target is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
                target[0].call_soon_threadsafe(target[1])

    @contextlib.contextmanager
    def attached(self, loop: Any, stop: Callable[[], None]) -> Iterator[None]:
        """While a run goes on `loop`, a stop asked calls `stop` there."""
        with self._lock:
            self._target, asked = (loop, stop), self.asked
        if asked:
            loop.call_soon(stop)
        try:
            yield
        finally:
            with self._lock:
                self._target = None


# The stop request of the calling context (set by bv.api in the thread that runs a stage).
STOP_REQUEST: contextvars.ContextVar[StopRequest | None] = contextvars.ContextVar("bv_stop", default=None)


@contextlib.contextmanager
def requested_stops(loop: Any, stop: Callable[[], None]) -> Iterator[None]:
    """While a stage's loop runs: a StopRequest of the calling context calls `stop` on it."""
    request = STOP_REQUEST.get()
    if request is None:
        yield
        return
    with request.attached(loop, stop):
        yield


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass
class Outcome:
    """How a stage's run went: what stopped it, and how many rows it wrote and how many failed."""

    signal: int | None = None  # the Ctrl-C or SIGTERM that stopped the run
    # A limit that stopped the run as a first Ctrl-C does (the cost limit), in words; `signal`
    # is then SIGINT's, so that every reader of an Outcome takes the run as interrupted.
    stopped: str | None = None
    stdout_closed: bool = False
    fatal: str | None = None  # the error that stopped the run
    rows: int = 0  # rows written
    failed: int = 0  # rows written with this stage's error set; a re-run retries exactly them
    failed_what: str = "failed"  # how those rows failed, e.g. "got a judge error"
    carried: int = 0  # rows that came in failed from an earlier stage (judge: a rollout error)
    broken_rows: int = 0  # rows left out on an unexpected error (a bug), each said on stderr
    cached: int | None = None  # rows a re-run takes from the cache; None when there is no cache
    bad_lines: int = 0  # input lines that could not be used, each said on stderr
    missing_files: int = 0  # inputs that could not be opened
    # USD the run's replies cost, with prices: the earlier stages' spend included (a stage's
    # `spent_before`), so that a face running several stages reads its whole run's spend here
    spent_usd: float = 0.0

    @property
    def interrupted(self) -> bool:
        return self.signal is not None


OK = 0
ROWS_FAILED = 1  # some rows failed, or the stage stopped on an error it names


def status_for(signum: int) -> int:
    """The shell's convention: 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + signum


def exit_status(outcome: Outcome, skip_bad: bool = False) -> int:
    """The status a stage exits with (the table in the module docstring)."""
    if outcome.stdout_closed:
        return OK
    if outcome.signal is not None:
        return status_for(outcome.signal)
    if outcome.fatal or outcome.failed or outcome.carried or outcome.broken_rows or outcome.missing_files:
        return ROWS_FAILED
    return ROWS_FAILED if outcome.bad_lines and not skip_bad else OK


def summary(outcome: Outcome, skip_bad: bool = False) -> str | None:
    """The closing line when not everything succeeded: what failed and how to resume; else None."""
    facts = []
    if outcome.failed:
        facts.append(f"{outcome.failed} of {plural(outcome.rows, 'row')} {outcome.failed_what}")
    if outcome.carried:
        facts.append(
            f"{plural(outcome.carried, 'row')} came in with a rollout error (re-run bv rollout for them)"
        )
    if outcome.broken_rows:
        facts.append(f"{plural(outcome.broken_rows, 'row')} left out on an internal error")
    if outcome.bad_lines:
        facts.append(plural(outcome.bad_lines, "bad input line") + (" skipped" if skip_bad else ""))
    if outcome.missing_files:
        facts.append(f"{plural(outcome.missing_files, 'input file')} could not be read")
    if outcome.signal is not None:
        head = (
            outcome.stopped
            or f"interrupted by {SIGNAL_NAMES.get(outcome.signal, f'signal {outcome.signal}')}"
        )
        facts.insert(0, f"{head} after {plural(outcome.rows, 'row')}")
    elif outcome.fatal and outcome.rows:
        facts.insert(0, f"stopped after {plural(outcome.rows, 'row')}")
    if not facts:
        return None
    text = "; ".join(facts)
    if outcome.signal is not None or outcome.fatal or outcome.failed or outcome.broken_rows:
        what = "re-run the same command to retry only the failed rows"
        if outcome.signal is not None:
            what = "re-run the same command to finish"
            if outcome.stopped is not None:
                what = "re-run the same command to go on (its limit counts only replies not yet cached)"
        elif outcome.fatal:
            what = "once the error above is fixed, re-run the same command"
        text += f"; {what}"
        if outcome.cached is not None:
            text += f": {outcome.cached} {'row is' if outcome.cached == 1 else 'rows are'} cached"
    return text


def finish(outcome: Outcome, problems: Any = None, skip_bad: bool = False) -> int:
    """Say how the stage ended (on stderr, on a fresh line) and return its exit status.
    `problems` (a bv.core.jsonl.Problems) gives the bad input lines and unreadable files."""
    if problems is not None:
        problems.finish()  # the counts of messages held back
        outcome.bad_lines, outcome.missing_files = problems.count, problems.files
    if outcome.stdout_closed:
        from bv.core.jsonl import silence_stdout

        silence_stdout()
        return OK
    if outcome.fatal:
        from bv.core.redaction import redact

        say(f"error: {redact(outcome.fatal)}")
    line = summary(outcome, skip_bad)
    if line:
        say(line)
    return exit_status(outcome, skip_bad)
