"""The one retry policy: how long to wait before the next try.

Backends translate whatever their transport raises into bv.errors' Transient (retried here),
ItemFailure or Fatal, so the engine decides retries the same way for every backend, the
judge included.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, never shorter than the server's Retry-After."""

    retries: int = 5
    base_s: float = field(default_factory=lambda: float(os.environ.get("BV_RETRY_BASE_S", "1")))
    cap_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number `attempt` (0-based)."""
        backoff = random.uniform(0, min(self.cap_s, self.base_s * 2**attempt))
        if retry_after is not None:
            # Honour the server, plus a little jitter so waiting clients do not return in lockstep.
            return min(max(retry_after, 0.0), 10 * self.cap_s) + random.uniform(0, 0.1 * self.base_s)
        return backoff


def retry_after_seconds(headers: object) -> float | None:
    """Read `retry-after-ms` or `Retry-After` (seconds) from response headers, if present and sane."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except (TypeError, ValueError):
            continue  # an HTTP date; rare from APIs, and backoff copes
        if 0 <= seconds < 3600:
            return seconds
    return None
