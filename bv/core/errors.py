"""How things fail in bv: one module of exception classes, cheap to import from anywhere.

A stage reports `BadRecord` as `file:line: why` and goes on; backends raise `Transient`
(retried), `ItemFailure` (that item's row gets `error`) or `Fatal` (the run stops, with a
message); `StdoutClosed` ends a stage quietly.
"""


class BadRecord(ValueError):
    """A record that cannot be used; the message says why, for a `file:line: why` report."""


class StdoutClosed(Exception):
    """The reader of our stdout went away (`| head`); the stage should stop quietly."""


class Transient(Exception):
    """Worth another try: 429, 5xx, a dropped connection, a timeout, a reply we cannot parse."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class RateLimited(Transient):
    """A 429: retried for as long as the run's rate-limit patience lasts, with fewer in flight."""


class NoReply(Transient):
    """Nothing came back: a timeout, or a connection refused or dropped before any answer."""


class ItemFailure(Exception):
    """This item cannot succeed (a 400, an unreadable image, retries used up); others still can."""


class Refused(ItemFailure):
    """The endpoint or agent itself refused this request (a 4xx, an agent's failure): the same
    refusal on a stage's first requests stops the stage (bv.engine.caller). `fix` says what to change."""

    def __init__(self, reason: str, fix: str = "") -> None:
        super().__init__(reason)
        self.fix = fix


class Fatal(Exception):
    """No item can succeed (wrong key, unknown model or URL, no room for the output): stop and say why."""


class Interrupted(Exception):
    """The run is stopping (Ctrl-C, SIGTERM); the item did not finish and will be redone next time."""
