"""How a command ends: its exit status, the signals that stop it, and its closing summary.

Every bv stage ends through `end_stage` (bv.core.outcome.finish, worded as options), so an exit
status means the same everywhere (docs/exit-status.md):

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
failed and how to resume. The library reports how a run went (bv.core.outcome: the Outcome,
its status and summary line); this module alone installs the signal handlers and ends the process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, NoReturn

from bv.core.outcome import (  # noqa: F401  (the statuses, as the CLI's modules name them)
    OK,
    ROWS_FAILED,
    SIGNAL_NAMES,
    STOP_SIGNALS,
    Outcome,
    exit_status,
    say,
    status_for,
    summary,
)


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


def end_stage(outcome: Outcome, problems: Any = None, skip_bad: bool = False) -> int:
    """bv.core.outcome.finish, the error that stopped the stage in the command line's words
    (the settings it names as the options that set them)."""
    from bv.cli.common import cli_words
    from bv.core import outcome as outcomes

    if outcome.fatal:
        outcome.fatal = cli_words(outcome.fatal)
    return outcomes.finish(outcome, problems, skip_bad)


def finish_rows(problems: Any, skip_bad: bool) -> None:
    """End a stage without requests (prompt, merge, import): exit 1 after bad input, else go on."""
    status = end_stage(Outcome(), problems, skip_bad)
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
