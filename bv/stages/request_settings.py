"""How a request stage sends its requests: the settings `bv rollout` and `bv judge` share (and
their configs inherit), each declared once (bv.core.settings): its option, help, default, bounds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bv.core.settings import setting
from bv.engine.defaults import (
    CACHE_SCOPE,
    CACHE_SCOPES,
    CONNECT_TIMEOUT_S,
    JOBS,
    RATE_LIMIT_PATIENCE_S,
    RETRIES,
    STALL_NOTICE_S,
    TIMEOUT_S,
)

if TYPE_CHECKING:
    from bv.engine.caller import RunSettings
    from bv.engine.prices import Prices

DEFAULT_CACHE = "default"  # the cache `bv rollout` and `bv judge` use ($BV_CACHE or the user cache folder)
# The settings of how long a request stage waits (bv rollout's, bv judge's and bv optimize's options).
WAITS = ("rate_limit_patience", "connect_timeout", "first_byte_timeout", "read_timeout", "stall_notice")
# What a run of several stages (bv eval, bv optimize) hands each stage it runs: how requests are
# sent, never what they compute, so a re-run may change any of them.
SENDING = ("jobs", "retries", "timeout", *WAITS, "cache", "cache_scope", "prices", "max_cost")


def reply_cache(given: str | Path) -> Path | None:
    """A `cache` as either face gives it: DEFAULT_CACHE (the commands' default cache), or a path."""
    if given == DEFAULT_CACHE:
        from bv.engine.cache import default_path

        return default_path()
    return Path(given)


@dataclass(frozen=True)
class RequestSettings:
    """Concurrency, retries, the waits (in seconds), the reply cache and the progress display."""

    jobs: int = setting(
        JOBS,
        "-j",
        "--jobs",
        kind=int,
        low=1,
        high=4096,
        show_default=True,
        help="Requests in flight at once.",
    )
    retries: int = setting(
        RETRIES,
        "--retries",
        kind=int,
        low=0,
        high=100,
        show_default=True,
        help="Retries per request on 5xx, timeouts and dropped connections (429s: --rate-limit-patience).",
    )
    timeout: float = setting(
        TIMEOUT_S,
        "--timeout",
        kind=float,
        low=0.1,
        show_default=True,
        help="Seconds per try of a request, all told.",
    )
    rate_limit_patience: float = setting(
        RATE_LIMIT_PATIENCE_S,
        "--rate-limit-patience",
        kind=float,
        low=0,
        show_default=True,
        metavar="SECONDS",
        help="How long a request keeps retrying 429s (rate limits), from its first one, waiting as the"
        " server asks (retry-after, x-ratelimit-reset-*); fewer requests are in flight meanwhile.",
    )
    connect_timeout: float = setting(
        CONNECT_TIMEOUT_S,
        "--connect-timeout",
        kind=float,
        low=0.1,
        show_default=True,
        metavar="SECONDS",
        help="Seconds to open a connection to the endpoint.",
    )
    first_byte_timeout: float | None = setting(
        None,
        "--first-byte-timeout",
        kind=float,
        low=0.1,
        metavar="SECONDS",
        help="Seconds from sending a request to the first byte of its reply (without streaming, most"
        " of the model's time). [default: --timeout]",
    )
    read_timeout: float | None = setting(
        None,
        "--read-timeout",
        kind=float,
        low=0.1,
        metavar="SECONDS",
        help="Seconds from a reply's first byte to its last. [default: --timeout]",
    )
    stall_notice: float = setting(
        STALL_NOTICE_S,
        "--stall-notice",
        kind=float,
        low=0.1,
        show_default=True,
        metavar="SECONDS",
        help="When no reply has come for this long, the progress line says so (the endpoint, the"
        " requests in flight).",
    )
    # the reply cache; None: none (bv.api and the commands default to DEFAULT_CACHE)
    cache: Path | None = setting(
        None,
        "--cache",
        kind=Path,
        api_default=DEFAULT_CACHE,
        convert=reply_cache,
        off=("--no-cache", "Neither read nor write the reply cache."),
        help="Reply cache (SQLite). [default: $XDG_CACHE_HOME/bv/cache.sqlite]",
    )
    # what the cache key names of where an OpenAI-compatible model's replies come from (bv.engine.cache)
    cache_scope: str = setting(
        CACHE_SCOPE,
        "--cache-scope",
        choices=CACHE_SCOPES,
        show_default=True,
        help="What the reply cache keys a model's replies by: model (its name: its replicas and a proxy"
        " share replies) or endpoint (also its base URLs: two deployments of one model name kept apart).",
    )
    quiet: bool = setting(
        False, "-q", "--quiet", kind=bool, api_default=True, help="No progress or summary on stderr."
    )
    batch: bool = setting(
        False,
        "--batch",
        kind=bool,
        help="Send the requests as batch jobs (OpenAI's or Azure's Batch API: about half the price, done"
        " within 24 h) and wait for them: the same rows and cache as online; run the same command again"
        " to resume a batch still running (docs/batch.md).",
    )
    # a price file, or "genai-prices" (bv.engine.prices); None: not priced
    prices: str | None = setting(
        None,
        "--prices",
        convert=str,
        metavar="FILE|genai-prices",
        envvar="BV_PRICES",
        show_envvar=True,
        help="Price each row (cost_usd): a JSON file of USD per million tokens per model, or genai-prices"
        " (pip install 'babyvision-bv[prices]'); docs/formats.md#prices.",
    )
    # USD: once this run has spent it, no new request starts
    max_cost: float | None = setting(
        None,
        "--max-cost",
        kind=float,
        low=0,
        metavar="USD",
        help="Stop starting requests once this run has spent this much (as a first Ctrl-C; needs --prices)."
        " With --batch it also needs a token limit, and submits only the requests whose worst case fits"
        " (docs/batch.md).",
    )
    # USD the run spent before this stage (bv eval's rollout before its judge, bv optimize's
    # earlier stages): counted in the spend that `max_cost` bounds and the progress line shows
    spent_before: float = 0.0
    dry_run: bool = False  # nothing will be sent: no key is needed
    # The prices `prices` names, read by the config's __post_init__ (bv.engine.prices.price_book).
    price_book: Prices | None = field(default=None, init=False, repr=False, compare=False)

    def endpoint_waits(self) -> dict[str, Any]:
        """The waits an HTTP endpoint is resolved with, and its cache scope (bv.engine.endpoints.resolve's
        keywords)."""
        return {
            "cache_scope": self.cache_scope,
            "timeout": self.timeout,
            "jobs": self.jobs,
            "connect_timeout": self.connect_timeout,
            "first_byte_timeout": self.first_byte_timeout,
            "read_timeout": self.read_timeout,
        }

    def run_settings(self, ordered: bool) -> RunSettings:
        """How the engine runs the stage."""
        from bv.engine.caller import RunSettings

        return RunSettings(
            jobs=self.jobs,
            retries=self.retries,
            timeout=self.timeout,
            rate_limit_patience=self.rate_limit_patience,
            stall_notice=self.stall_notice,
            cache_path=self.cache,
            quiet=self.quiet,
            ordered=ordered,
            prices=self.price_book,
            max_cost=self.max_cost,
        )
