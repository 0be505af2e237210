"""How a command ends: its exit status, the signals that stop it, and its closing summary.

Every bv stage ends through `finish`, so an exit status means the same everywhere
(docs/exit-status.md):

    0    everything succeeded
    1    some rows failed (rollout errors, judge errors, bad input lines), every row still
         written; or the stage stopped on an error it names
    2    usage error (a bad option or argument), before any work (click's own status)
    130  interrupted by Ctrl-C (SIGINT)
    143  interrupted by SIGTERM (what `timeout`, schedulers and CI send)

A reader that leaves (`| head`) ends a streaming stage quietly with 0 (`stdout_closed`): the rows
it did not get to are not failures. Commands that read their whole input before writing (report,
merge, export) keep the status of that input instead (bv.cli.common.reader_may_leave).

SIGTERM is handled as the first Ctrl-C: no new requests, those in flight get the grace
period, finished rows are written (and cached), then exit 143. A second signal quits the
process (`quit_soon`, the run's `hard_stop`). The summary names the stage, says how many rows
failed and how to resume. The library only reports how a run went (bv.core.outcome.Outcome);
this module alone turns that into a status and ends the process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, NoReturn

from bv.core.outcome import SIGNAL_NAMES, STOP_SIGNALS, Outcome, plural, say

OK = 0
ROWS_FAILED = 1  # some rows failed, or the stage stopped on an error it names


def status_for(signum: int) -> int:
    """The shell's convention: 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + signum


class Terminated(BaseException):
    """SIGTERM, raised where no event loop handles it: it unwinds like KeyboardInterrupt."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def install_sigterm() -> None:
    """Make SIGTERM end a stage the way Ctrl-C does (rows written so far stay whole), not silently."""
    with contextlib.suppress(ValueError):  # not the main thread: leave it alone
        signal.signal(signal.SIGTERM, _raise_terminated)


def quit_on_next_signal(status: int) -> None:
    """After the first stop, a second Ctrl-C or SIGTERM leaves at once."""
    for signum in STOP_SIGNALS:
        with contextlib.suppress(ValueError):
            signal.signal(signum, lambda *_: os._exit(status))


def quit_soon(signum: int) -> None:
    """A run's `hard_stop` on the command line: a second Ctrl-C or SIGTERM. The run has cancelled
    what was in flight and unwinds; if anything still lingers a second later (a thread in a long
    read), the process leaves without waiting for it."""
    timer = threading.Timer(1.0, leave, (status_for(signum),))
    timer.daemon = True
    timer.start()


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
        head = f"interrupted by {SIGNAL_NAMES.get(outcome.signal, f'signal {outcome.signal}')}"
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
        from bv.cli.common import cli_words
        from bv.core.redaction import redact

        say(f"error: {cli_words(redact(outcome.fatal))}")
    line = summary(outcome, skip_bad)
    if line:
        say(line)
    return exit_status(outcome, skip_bad)


def finish_rows(problems: Any, skip_bad: bool) -> None:
    """End a stage without requests (prompt, merge, import): exit 1 after bad input, else go on."""
    status = finish(Outcome(), problems, skip_bad)
    if status:
        sys.exit(status)


def interrupted(signum: int) -> int:
    """A stage without an event loop was stopped by Ctrl-C or SIGTERM: say so, return the status."""
    status = status_for(signum)
    quit_on_next_signal(status)
    say(f"interrupted by {SIGNAL_NAMES[signum]}; re-run the same command to finish")
    return status


def leave(status: int) -> NoReturn:
    """Exit at once, skipping interpreter teardown (0.4 s once the openai SDK is loaded): every
    row is already written and flushed and every cached reply committed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)
