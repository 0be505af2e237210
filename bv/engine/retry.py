"""The one retry policy: how long to wait before the next try.

Backends translate whatever their transport raises into bv.core.errors' Transient (retried here),
ItemFailure or Fatal, so the engine decides retries the same way for every backend, the
judge included. A server's Retry-After is honoured up to the run's max_wait_s (BV_MAX_WAIT_S,
bv.core.run_context.Limits); a longer one is capped, and bv says so on stderr, once a run.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from bv.core.run_context import current


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, never shorter than the server's Retry-After."""

    retries: int = 5
    base_s: float = field(default_factory=lambda: current().limits.retry_base_s)
    cap_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number `attempt` (0-based)."""
        if retry_after is not None:
            # Honour the server, plus a little jitter so waiting clients do not return in lockstep.
            cap = current().limits.max_wait_s
            return min(max(retry_after, 0.0), cap) + random.uniform(0, 0.1 * self.base_s)
        return random.uniform(0, min(self.cap_s, self.base_s * 2**attempt))


def retry_after_seconds(headers: object, now: float | None = None) -> float | None:
    """The wait a response asks for: `retry-after-ms`, or `Retry-After` in seconds or as an HTTP date.

    None when absent or unusable (negative, not a number or date): backoff applies. A wait over
    the run's max_wait_s is cut to it, and the first such cut is said on stderr."""
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
    run = current()
    cap = run.limits.max_wait_s
    if seconds > cap:
        if run.first_time("retry: wait capped"):
            sys.stderr.write(
                f"bv: the server asked to wait {seconds:,.0f} s before retrying; waiting {cap:g} s"
                " at most (bv's cap on one wait)\n"
            )
        return cap
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
