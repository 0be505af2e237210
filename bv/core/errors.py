"""How things fail in bv: one exception tree under `BVError`, cheap to import from anywhere.

A stage reports `BadRecord` as `file:line: why` and goes on; backends raise `Transient`
(retried), `ItemFailure` (that item's row gets `error`) or `Fatal` (the run stops, with a
message); `StdoutClosed` ends a stage quietly; `BadConfig` refuses settings that cannot work
before any work; `Interrupted` is a run (or one item of it) stopped by Ctrl-C, SIGTERM or a
cancellation. The library raises these and never ends the process: bv.cli turns them into
messages and exit statuses (docs/exit-status.md), bv.api hands them to its caller.

A message names what is wrong in the library's words; `option`, when set, names the setting it
is about (a field of the stage's config, e.g. "base_url"), so each face can say how to fix it
in its own terms (bv.cli: `--base-url`).
"""

from __future__ import annotations


class BVError(Exception):
    """Anything bv raises on purpose: catch this to catch every bv failure."""

    def __init__(self, message: str = "", *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option  # the config field the message is about, if any


class BadRecord(BVError, ValueError):
    """A record that cannot be used; the message says why, for a `file:line: why` report."""


class BadConfig(BVError, ValueError):
    """Settings that cannot work together or at all, refused before any work (the CLI exits 2)."""


class StdoutClosed(BVError):
    """The reader of our stdout went away (`| head`); the stage should stop quietly."""


class Transient(BVError):
    """Worth another try: 429, 5xx, a dropped connection, a timeout, a reply we cannot parse."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class RateLimited(Transient):
    """A 429: retried for as long as the run's rate-limit patience lasts, with fewer in flight."""


class NoReply(Transient):
    """Nothing came back: a timeout, or a connection refused or dropped before any answer."""


class ItemFailure(BVError):
    """This item cannot succeed (a 400, an unreadable image, retries used up); others still can."""


class Refused(ItemFailure):
    """The endpoint or agent itself refused this request (a 4xx, an agent's failure): the same
    refusal on a stage's first requests stops the stage (bv.engine.caller). `fix` says what to change."""

    def __init__(self, reason: str, fix: str = "") -> None:
        super().__init__(reason)
        self.fix = fix


class Fatal(BVError):
    """No item can succeed (wrong key, unknown model or URL, no room for the output): stop and say why."""


class Unreachable(Fatal):
    """An endpoint that has never answered (refused, unresolvable, hung): no try got an answer."""


class MissingPackage(BVError, ImportError):
    """An optional package that what was asked needs is not installed; the message says which."""


class Interrupted(BVError):
    """The run is stopping (Ctrl-C, SIGTERM, a cancelled call); what did not finish is redone next
    time. Raised by bv.api for a whole run: `signal` is the signal that stopped it (None for a
    cancellation), `rows` how many rows had finished (and were cached)."""

    def __init__(self, message: str = "", *, signal: int | None = None, rows: int = 0) -> None:
        super().__init__(message)
        self.signal = signal
        self.rows = rows
