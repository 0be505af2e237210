"""The one retry policy: how long to wait before the next try, how long to bear rate limits,
and how many requests to keep in flight while they last.

Backends translate whatever their transport raises into bv.core.errors' Transient (retried here),
RateLimited (a 429: retried for as long as the run's patience lasts), ItemFailure or Fatal, so
the engine decides retries the same way for every backend, the judge included. The wait a
server asks for is honoured in every form users meet (`wait_seconds`) up to the run's max_wait_s
(BV_MAX_WAIT_S, bv.core.run_context.Limits); a longer one is capped, and bv says so on stderr.
While 429s go on, `ConcurrencyLimit` halves the
requests in flight, and gives them back as clean replies return; a 429's wait pauses the endpoint:
no request is sent until it is over (the wait asked of one request holds for all).
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from bv.core.run_context import current
from bv.engine.defaults import RATE_LIMIT_PATIENCE_S, RETRIES


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, never shorter than the server's wait; `retries` tries
    more for 5xx, timeouts and dropped connections, and 429s for up to `rate_limit_patience`."""

    retries: int = RETRIES
    rate_limit_patience: float = RATE_LIMIT_PATIENCE_S
    base_s: float = field(default_factory=lambda: current().limits.retry_base_s)
    cap_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number `attempt` (0-based)."""
        if retry_after is not None:
            # Honour the server, plus a little jitter so waiting clients do not return in lockstep.
            cap = current().limits.max_wait_s
            return min(max(retry_after, 0.0), cap) + random.uniform(0, 0.1 * self.base_s)
        return random.uniform(0, min(self.cap_s, self.base_s * 2 ** min(attempt, 32)))


# Where servers and proxies put the wait, most precise first. LiteLLM passes on the provider's
# headers with an `llm_provider-` prefix.
_PREFIXES = ("", "llm_provider-")
_RESETS = ("requests", "tokens")  # OpenAI's x-ratelimit-reset-<limit>, with remaining-<limit>
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def wait_seconds(headers: object, now: float | None = None) -> float | None:
    """The wait a response asks for, in seconds; None when it names none (backoff applies).

    Read, first found first: `retry-after-ms`; `retry-after` in seconds or as an HTTP date; the
    same two with LiteLLM's `llm_provider-` prefix; OpenAI's `x-ratelimit-reset-requests` and
    `-tokens` (durations such as `1s`, `6m0s`, `20ms`, also prefixed): the reset of the limit
    whose `x-ratelimit-remaining-*` is 0, else the sooner reset. A value that is negative, not a
    number, date or duration is ignored. A wait over the run's max_wait_s is cut to it, and the first
    such cut in a run is said on stderr."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    seconds = None
    for prefix in _PREFIXES:
        seconds = _retry_after(get, prefix, time.time() if now is None else now)
        if seconds is not None:
            break
    else:
        for prefix in _PREFIXES:
            seconds = _reset_wait(get, prefix)
            if seconds is not None:
                break
    if seconds is None:
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


def _retry_after(get: Callable[[str], object], prefix: str, now: float) -> float | None:
    milliseconds = _number(get(prefix + "retry-after-ms"))
    if milliseconds is not None and milliseconds >= 0:
        return milliseconds / 1000
    value = get(prefix + "retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is None:
        seconds = _http_date_wait(str(value), now)
    return seconds if seconds is not None and seconds >= 0 else None


def _reset_wait(get: Callable[[str], object], prefix: str) -> float | None:
    resets = {}
    for limit in _RESETS:
        value = get(f"{prefix}x-ratelimit-reset-{limit}")
        seconds = None if value is None else duration_seconds(str(value))
        if seconds is not None:
            resets[limit] = seconds
    if not resets:
        return None
    spent = [s for limit, s in resets.items() if _number(get(f"{prefix}x-ratelimit-remaining-{limit}")) == 0]
    return max(spent) if spent else min(resets.values())


def duration_seconds(value: str) -> float | None:
    """A Go-style duration (`1s`, `6m0s`, `20ms`, `1h2m3.5s`) or a bare number of seconds, in
    seconds; None for anything else (a negative value included)."""
    text = value.strip()[:64]
    number = _number(text)
    if number is not None:
        return number if number >= 0 else None
    total, end = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != end:
            return None
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        end = match.end()
    return total if end and end == len(text) and math.isfinite(total) else None


def _number(value: object) -> float | None:
    if value is None:
        return None
    try:
        number = float(str(value).strip()[:32])
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _http_date_wait(value: str, now: float) -> float | None:
    try:
        when = parsedate_to_datetime(value[:64])
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


class ConcurrencyLimit:
    """How many requests may be in flight: `most` at first, halved when a 429 answers a request
    sent since the last cut (the ones sent before it spoke of the old level), one step back up
    after each round of `limit` clean replies, up to `most` again. A request waiting for a slot
    waits in order; the stream's workers stay `most`, so recovery needs no new tasks."""

    def __init__(self, most: int) -> None:
        self.most = self.limit = max(1, most)
        self.active = 0
        self.cuts = 0  # how many times the limit was cut: a request's ticket is the count it saw
        self._clean = 0  # clean replies since the limit last changed
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._paused_until = 0.0  # time.monotonic() before which no request is sent (a retry-after)

    def pause(self, seconds: float) -> None:
        """The endpoint asked to wait `seconds` (already capped by wait_seconds): every request not
        yet sent waits too, instead of each one finding out with a 429 of its own."""
        self._paused_until = max(self._paused_until, time.monotonic() + max(0.0, seconds))

    def pause_left(self) -> float:
        return self._paused_until - time.monotonic()

    async def acquire(self) -> int:
        """Wait for a slot; returns the ticket to hand back to `rate_limited` or `succeeded`."""
        if self.active < self.limit and not self._waiters:
            self.active += 1
            return self.cuts
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over as we were cancelled: pass it on
            else:
                self._waiters.remove(waiter)
            raise
        return self.cuts

    def release(self) -> None:
        self.active -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.active < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.active += 1
                waiter.set_result(None)

    def rate_limited(self, ticket: int) -> None:
        if ticket == self.cuts and self.limit > 1:
            self.limit = max(1, self.limit // 2)
            self.cuts += 1
            self._clean = 0

    def succeeded(self, ticket: int) -> None:
        if self.limit >= self.most or ticket != self.cuts:
            return
        self._clean += 1
        if self._clean >= self.limit:
            self.limit = min(self.most, self.limit + max(1, self.limit // 4))
            self._clean = 0
            self._wake()
