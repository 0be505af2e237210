"""`max_cost` under `batch`: a batch job cannot be stopped part-way once submitted (the provider
bills what it ran), so the limit is kept before each batch is submitted, not while it runs.

Each request to submit counts at its worst case: an upper bound of its prompt tokens (the stage's
`prompt_tokens`) plus `max_tokens` of completion, at the dearest batch rates its reply may be
priced at. A reply is priced by the model its server names (bv.engine.prices.reply_cost), which
may be any model the price file prices, so those are the price file's dearest batch rates
(`batch_ceiling`; issue 34: priced at the model asked for, a server naming a dearer one spent
$0.66 of $0.01); a source that cannot bound them is refused up front. The requests that fit, in order,
in what is left of the limit (the limit less what the run has spent and the worst case of the
recorded batches it resumes) are submitted; the rest are held back, and once the submitted ones
are collected the run stops at the cost limit, as the online one does. A request whose worst case
cannot be priced (no batch price for the model) holds everything back: the limit could not be kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bv.core.images import ImageError
from bv.core.stats import counted
from bv.engine.prices import Prices, Rates, at_rates, batch_ceiling
from bv.engine.progress import Stats

Messages = list[dict[str, Any]]


@dataclass
class Fit:
    """What a batch may send: `send` (in order), `held` back, and why, when anything is."""

    send: list[str]
    held: list[str]
    unknown: str | None = None  # why a worst case has no price (then everything is held)


@dataclass
class BatchBudget:
    prices: Prices
    limit: float  # USD
    model: str
    endpoint: str | None  # the URL prices are looked up by
    max_tokens: int  # the most a completion may use
    prompt_tokens: Callable[[Messages], int]  # an upper bound of a request's prompt tokens
    ceiling: Rates | str = field(init=False)  # the dearest batch rates a reply may be priced at

    def __post_init__(self) -> None:
        self.ceiling = batch_ceiling(self.prices, self.model, self.endpoint)

    def worst(self, messages: Messages) -> float | str:
        """The most one request may cost at batch rates, or why that is unknown."""
        if isinstance(self.ceiling, str):
            return self.ceiling
        return at_rates(self.ceiling, self.prompt_tokens(messages), self.max_tokens)

    def reserved(self, requests: Iterable[Messages]) -> float:
        """The worst case of requests already submitted (a resumed batch): they will be billed."""
        total = 0.0
        for messages in requests:
            worst = self._worst_or_zero(messages)
            total += worst if isinstance(worst, float) else 0.0
        return total

    def fit(self, keys: list[str], messages: Callable[[str], Messages], spent: float) -> Fit:
        """The requests, in order, whose worst cases fit in the limit less `spent`."""
        left = self.limit - spent
        for index, key in enumerate(keys):
            worst = self._worst_or_zero(messages(key))
            if isinstance(worst, str):
                return Fit(keys[:index], keys[index:], worst)
            if worst > left:
                return Fit(keys[:index], keys[index:])
            left -= worst
        return Fit(list(keys), [])

    def _worst_or_zero(self, messages: Messages) -> float | str:
        """`worst`; 0 for a request whose images cannot be read: it fails before it is sent."""
        try:
            return self.worst(messages)
        except (ImageError, OSError):
            return 0.0

    def stop(self, stats: Stats, held: int, unknown: str | None) -> bool:
        """Stop the run at the limit after a batch (`unknown`: what has no price, in words) when it
        must; whether it did. The words say the spend when shown (Stats.stop_text)."""
        if unknown is not None:
            stats.limit_reached = f"stopped: {unknown}, so the cost limit cannot be kept"
        elif held:
            stats.stop_at_cost_limit(
                self.limit,
                f"{counted(held, 'request')} not sent: each may cost up to its prompt and"
                f" {self.max_tokens} completion tokens at the dearest batch rates of the price file,"
                " more than was left",
            )
        elif stats.spent_usd >= self.limit:
            stats.stop_at_cost_limit(self.limit)
        return stats.limit_reached is not None
