"""A dry run's cost range: what the requests still to send would cost, from the estimated prompt
tokens, a guess of the completion tokens, and the run's prices.

The completion tokens come from `max_tokens` (the most a reply may use) and from the cache's
earlier replies of the same model (what replies have used). The low end of the range is every
request to send with a typical completion and no refinement turn; the high end every request,
and every refinement turn that may follow, at the most a completion may use. With neither a
token limit nor earlier replies there is no high end: the range says so rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from bv.core.stats import counted, human_count
from bv.engine.cache import ReplyCache
from bv.engine.prices import Prices


@dataclass(frozen=True)
class Completions:
    """What a reply of the model may use: `typical` (the mean of earlier replies), `most` (the
    token limit, else the most an earlier reply used), and the words that say where from."""

    typical: float | None
    most: int | None
    source: str


def guess_completions(
    cache: ReplyCache | None, backend: str, model: str | None, max_tokens: int | None
) -> Completions:
    earlier = cache.completion_tokens(backend, model) if cache is not None and model else []
    typical = sum(earlier) / len(earlier) if earlier else None
    most = max_tokens if max_tokens is not None else max(earlier, default=None)
    parts = []
    if typical is not None:
        replies = counted(len(earlier), "earlier reply")
        parts.append(f"~{human_count(round(typical))} tokens per reply, the mean of {replies} in the cache")
    if max_tokens is not None:
        parts.append(f"at most {human_count(max_tokens)} (the token limit)")
    elif most is not None:
        parts.append(f"at most {human_count(most)} so far")
    return Completions(typical, most, "; ".join(parts) or "unknown (no token limit, no earlier replies)")


def cost_lines(
    prices: Prices | None,
    model: str | None,
    endpoint: str | None,
    to_send: int,
    may_send: int,
    prompt_tokens: int,
    completions: Completions,
) -> list[str]:
    """The dry run's lines on completions and cost."""
    lines = [f"completions:   {completions.source}"]
    if prices is None:
        return [*lines, "cost:          not estimated: give `prices` (a price file, or genai-prices)"]
    if to_send == 0:
        return [*lines, "cost:          $0.00: every request is answered by the cache"]
    name = model or ""
    per_prompt = prompt_tokens / to_send

    def price(requests: float, prompt: float, completion: float) -> float | None:
        usage = {"prompt_tokens": round(requests * prompt), "completion_tokens": round(requests * completion)}
        return prices.cost(name, usage, endpoint=endpoint).usd

    floor = price(to_send, per_prompt, completions.typical or 0)
    if floor is None:
        why = prices.cost(name, {"prompt_tokens": 0, "completion_tokens": 0}, endpoint=endpoint).source
        return [*lines, f"cost:          {why}"]
    if completions.most is None:
        return [
            *lines,
            f"cost:          at least ${floor:,.2f} ({prices.name}); no upper bound: no token limit"
            " and no earlier replies of this model in the cache",
        ]
    most = completions.most
    ceiling = (price(to_send, per_prompt, most) or 0) + (
        price(may_send, per_prompt + most, most) or 0  # a refinement turn resends the reply before
    )
    turns = f", with {counted(may_send, 'refinement turn')}" if may_send else ""
    return [
        *lines,
        f"cost:          ${floor:,.2f} to ${ceiling:,.2f} ({prices.name}; the high end: every completion"
        f" at {human_count(most)} tokens{turns})",
    ]
