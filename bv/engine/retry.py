"""The one retry policy: how long to wait before the next try.

Backends translate whatever their transport raises into bv.core.errors' Transient (retried here),
ItemFailure or Fatal, so the engine decides retries the same way for every backend, the
judge included. A server's Retry-After is honoured up to MAX_WAIT_S; a longer one is capped,
and bv says so on stderr.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from bv.core import environment

# The longest bv waits before one retry, whatever the server asks (BV_MAX_WAIT_S to change it).
MAX_WAIT_S = environment.number("BV_MAX_WAIT_S", 300)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, never shorter than the server's Retry-After."""

    retries: int = 5
    base_s: float = field(default_factory=lambda: environment.number("BV_RETRY_BASE_S", 1))
    cap_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number `attempt` (0-based)."""
        if retry_after is not None:
            # Honour the server, plus a little jitter so waiting clients do not return in lockstep.
            return min(max(retry_after, 0.0), MAX_WAIT_S) + random.uniform(0, 0.1 * self.base_s)
        return random.uniform(0, min(self.cap_s, self.base_s * 2**attempt))


_capped_said = False


def retry_after_seconds(headers: object, now: float | None = None) -> float | None:
    """The wait a response asks for: `retry-after-ms`, or `Retry-After` in seconds or as an HTTP date.

    None when absent or unusable (negative, not a number or date): backoff applies. A wait over
    MAX_WAIT_S is cut to it, and the first such cut is said on stderr."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    seconds = None
    milliseconds = _number(get("retry-after-ms"))
    if milliseconds is not None:
        seconds = milliseconds / 1000
    else:
        value = get("retry-after")
        if value is None:
            return None
        seconds = _number(value)
        if seconds is None:
            seconds = _http_date_wait(str(value), time.time() if now is None else now)
    if seconds is None or seconds < 0:
        return None
    if seconds > MAX_WAIT_S:
        global _capped_said
        if not _capped_said:
            _capped_said = True
            sys.stderr.write(
                f"bv: the server asked to wait {seconds:,.0f} s before retrying; waiting {MAX_WAIT_S:g} s"
                " at most (bv's cap on one wait)\n"
            )
        return MAX_WAIT_S
    return seconds


def _number(value: object) -> float | None:
    if value is None:
        return None
    try:
        number = float(str(value).strip()[:32])
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


def _http_date_wait(value: str, now: float) -> float | None:
    try:
        when = parsedate_to_datetime(value[:64])
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)
