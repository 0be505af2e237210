"""A dry run's cost range: what the requests still to send would cost, from the estimated prompt
tokens, a guess of the completion tokens, and the run's prices.

The completion tokens come from `max_tokens` (the most a reply may use) and from the cache's
earlier replies of the same model (what replies have used). The low end of the range is every
request to send with a typical completion and no refinement turn; the high end every request,
and every refinement turn that may follow, at the most a completion may use. With neither a
token limit nor earlier replies there is no high end: the range says so rather than guess.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bv.core.images import ImageError
from bv.core.records import message_text
from bv.core.stats import counted, dollars, human_count
from bv.engine.cache import ReplyCache
from bv.engine.prices import Prices
from bv.stages.dryrun import ImageCosts, image_tokens, request_cost, request_images

TOKENS_PER_MESSAGE = 4  # OpenAI's chat format counts 3 per message (role, delimiters); 1 to spare
REPLY_PRIMING = 3  # and 3 that start the reply
MAX_PATCHES = 1536  # OpenAI's patch-counted models (gpt-4.1-mini, o4-mini, gpt-5-mini, ...)
PATCH_MULTIPLIER = 2.46  # the largest of their published multipliers (gpt-4.1-nano, gpt-5-nano)


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
    batch: bool = False,
) -> list[str]:
    """The dry run's lines on completions and cost; with `batch`, at batch rates, beside the
    online figure (what the batch saves)."""
    lines = [f"completions:   {completions.source}"]
    if prices is None:
        return [*lines, "cost:          not estimated: give `prices` (a price file, or genai-prices)"]
    if to_send == 0:
        return [*lines, "cost:          $0.00: every request is answered by the cache"]
    name = model or ""
    per_prompt = prompt_tokens / to_send

    def cost_range(at_batch: bool) -> tuple[float, float | None] | str:
        """(low, high) in USD (high None: no bound), or why the price is unknown."""

        def price(requests: float, prompt: float, completion: float) -> float | None:
            usage = {
                "prompt_tokens": round(requests * prompt),
                "completion_tokens": round(requests * completion),
            }
            return prices.cost(name, usage, endpoint=endpoint, batch=at_batch).usd

        floor = price(to_send, per_prompt, completions.typical or 0)
        if floor is None:
            zero = {"prompt_tokens": 0, "completion_tokens": 0}
            return prices.cost(name, zero, endpoint=endpoint, batch=at_batch).source
        most = completions.most
        if most is None:
            return floor, None
        ceiling = (price(to_send, per_prompt, most) or 0) + (
            price(may_send, per_prompt + most, most) or 0  # a refinement turn resends the reply before
        )
        return floor, ceiling

    def spelt(found: tuple[float, float | None] | str) -> str:
        if isinstance(found, str):
            return found
        floor, ceiling = found
        return f"at least {dollars(floor)}" if ceiling is None else f"{dollars(floor)} to {dollars(ceiling)}"

    found = cost_range(batch)
    if isinstance(found, str):
        return [*lines, f"cost:          {found}"]
    basis = " at batch rates" if batch else ""
    online = f"; online: {spelt(cost_range(False))}" if batch else ""
    if found[1] is None:
        return [
            *lines,
            f"cost:          {spelt(found)}{basis} ({prices.name}{online}); no upper bound: no token limit"
            " and no earlier replies of this model in the cache",
        ]
    most = completions.most
    turns = f", with {counted(may_send, 'refinement turn')}" if may_send else ""
    return [
        *lines,
        f"cost:          {spelt(found)}{basis} ({prices.name}; the high end: every completion"
        f" at {human_count(most or 0)} tokens{turns}{online})",
    ]


def image_token_bound(width: int, height: int, detail: str) -> int:
    """The most prompt tokens OpenAI's published rules give an image: the larger of the tile rule
    (gpt-4o, gpt-4.1, o1, o3) and the 32-pixel-patch rule (at most 1536 patches, times the largest
    multiplier)."""
    patches = min(MAX_PATCHES, math.ceil(width / 32) * math.ceil(height / 32))
    return max(image_tokens(width, height, detail), math.ceil(patches * PATCH_MULTIPLIER))


def prompt_token_bound(max_pixels: int | None) -> Callable[[list[dict[str, Any]]], int]:
    """An upper bound of a request's prompt tokens, for `max_cost` under `batch`: its text at
    one token per UTF-8 byte (a byte-level BPE token, as OpenAI's, is at least one byte), the chat
    format's tokens per message, and each image at `image_token_bound`. Images that cannot be
    read raise ImageError or OSError (their request fails anyway)."""
    costs = ImageCosts(max_pixels)

    def bound(messages: list[dict[str, Any]]) -> int:
        text = sum(len(message_text(m.get("content")).encode()) for m in messages)
        tokens = text + TOKENS_PER_MESSAGE * len(messages) + REPLY_PRIMING
        for _, (width, height), detail in request_images(messages, costs):
            tokens += image_token_bound(width, height, detail)
        return tokens

    return bound


def online_worst_case(
    prices: Prices | None,
    max_cost: float | None,
    model: str,
    endpoint: str | None,
    max_tokens: Any,
    max_pixels: int | None,
) -> Callable[[list[dict[str, Any]]], float | None] | None:
    """What the caller reserves of `max_cost` before each online request (bv.engine.caller): its
    prompt tokens as the dry run estimates them (text at 4 characters a token, images by OpenAI's
    tile rule, the chat format's tokens) plus `max_tokens` of completion (none without a token
    limit), at the online price; None when there is no limit to keep."""
    if prices is None or max_cost is None:
        return None
    costs, most = ImageCosts(max_pixels), max_tokens if max_tokens.__class__ is int else 0

    def worst(messages: list[dict[str, Any]]) -> float | None:
        try:
            prompt = request_cost(messages, costs)[1] + TOKENS_PER_MESSAGE * len(messages) + REPLY_PRIMING
            usage = {"prompt_tokens": prompt, "completion_tokens": most}
        except (ImageError, OSError):  # the request fails on its image before anything is paid
            return None
        return prices.cost(model, usage, endpoint=endpoint).usd

    return worst
