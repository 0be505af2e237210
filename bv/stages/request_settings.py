"""How a request stage sends its requests: the settings `bv rollout` and `bv judge` share (and
their configs inherit), in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bv.engine.caller import RunSettings
from bv.engine.endpoints import CONNECT_TIMEOUT_S
from bv.engine.prices import Prices
from bv.engine.retry import RATE_LIMIT_PATIENCE_S


@dataclass(frozen=True)
class RequestSettings:
    """Concurrency, retries, the waits (in seconds), the reply cache and the progress display."""

    jobs: int = 8
    retries: int = 5
    timeout: float = 600.0  # per try of a request, all told
    rate_limit_patience: float = RATE_LIMIT_PATIENCE_S  # how long one request bears 429s
    connect_timeout: float = CONNECT_TIMEOUT_S
    first_byte_timeout: float | None = None  # None: `timeout`
    read_timeout: float | None = None  # None: `timeout`
    stall_notice: float = 30.0  # no reply for this long: the progress line says so
    cache: Path | None = None  # the reply cache; None: none
    quiet: bool = False
    batch: bool = False  # the requests as batch jobs (bv.engine.batch)
    prices: str | None = None  # a price file, or "genai-prices" (bv.engine.prices); None: not priced
    max_cost: float | None = None  # USD: once this run has spent it, no new request starts
    # USD the run spent before this stage (bv eval's rollout before its judge, bv optimize's
    # earlier stages): counted in the spend that `max_cost` bounds and the progress line shows
    spent_before: float = 0.0
    dry_run: bool = False  # nothing will be sent: no key is needed
    # The prices `prices` names, read by the config's __post_init__ (bv.engine.prices.price_book).
    price_book: Prices | None = field(default=None, init=False, repr=False, compare=False)

    def endpoint_waits(self) -> dict[str, Any]:
        """The waits an HTTP endpoint is resolved with (bv.engine.endpoints.resolve's keywords)."""
        return {
            "timeout": self.timeout,
            "jobs": self.jobs,
            "connect_timeout": self.connect_timeout,
            "first_byte_timeout": self.first_byte_timeout,
            "read_timeout": self.read_timeout,
        }

    def run_settings(self, ordered: bool) -> RunSettings:
        """How the engine runs the stage."""
        return RunSettings(
            jobs=self.jobs,
            retries=self.retries,
            timeout_s=self.timeout,
            rate_limit_patience_s=self.rate_limit_patience,
            stall_notice_s=self.stall_notice,
            cache_path=self.cache,
            quiet=self.quiet,
            ordered=ordered,
            prices=self.price_book,
            max_cost=self.max_cost,
        )
