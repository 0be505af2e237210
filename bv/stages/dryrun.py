"""`bv rollout --dry-run`: what a rollout would send and what it would cost, sending nothing.

It reads the input as the rollout would (the same checks, the same shard), looks every request
up in the reply cache (following cached replies through refinement turns, as a re-run would),
and adds up, for the requests still to send, the bytes of their images as they would go out and
an estimate of their prompt tokens. Nothing is sent and nothing is written to the cache.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bv.core.extract import has_answer
from bv.core.images import ImageError, ImageOptions, encode_image, image_paths, pillow
from bv.core.records import PromptRecord, message_text
from bv.core.stats import counted
from bv.engine.backends import Backend, Reply
from bv.engine.cache import ImageHashes, ReplyCache, request_key
from bv.stages.rollout_config import RolloutConfig
from bv.stages.rollout_turns import next_turn, refusal_or_filtered

CHARS_PER_TOKEN = 4  # a common rule of thumb for English text


@dataclass
class Plan:
    """The figures a dry run prints."""

    rows: int = 0
    requests: int = 0  # first turns: rows × repeats
    most_requests: int = 0  # if every turn but the last lacked \boxed{}: × max_turns
    cached: int = 0  # requests the cache would answer
    to_send: int = 0  # requests that would certainly be sent
    may_send: int = 0  # further refinement turns that may be sent
    image_bytes: int = 0  # of the images in the requests to send, base64 as sent
    prompt_tokens: int = 0  # estimated, for the requests to send
    image_errors: int = 0  # requests whose images cannot be read (they would fail)


def image_tokens(width: float, height: float, detail: str = "auto") -> int:
    """OpenAI's published rule for an image's prompt tokens: 85, plus 170 per 512-pixel tile of
    the image scaled into 2048×2048 and then to 768 pixels on its short side (85 alone for low
    detail). Other models count differently; this is an estimate."""
    if detail == "low":
        return 85
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    width, height = width * scale, height * scale
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


class ImageCosts:
    """Bytes as sent and estimated tokens of each image file, worked out once per file."""

    def __init__(self, max_pixels: int | None) -> None:
        self.options = ImageOptions(max_pixels=max_pixels)
        self._known: dict[Path, tuple[int, tuple[int, int]]] = {}

    def __call__(self, path: Path) -> tuple[int, tuple[int, int]]:
        if path not in self._known:
            uri = encode_image(path, self.options)
            Image, _ = pillow()
            with Image.open(path) as img:
                size = img.size
            if self.options.max_pixels and size[0] * size[1] > self.options.max_pixels:
                scale = (self.options.max_pixels / (size[0] * size[1])) ** 0.5
                size = (max(1, int(size[0] * scale)), max(1, int(size[1] * scale)))
            self._known[path] = (len(uri), size)
        return self._known[path]


def request_images(
    messages: list[dict[str, Any]], costs: ImageCosts
) -> Iterator[tuple[int, tuple[int, int], str]]:
    """(bytes as sent, (width, height) as sent, detail) of each image of one request."""
    details = [
        (part.get("image_url") or {}).get("detail", "auto")
        for m in messages
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if isinstance(part, dict) and part.get("type") == "image_url"
    ]
    for path, detail in zip(image_paths(messages), details, strict=False):
        size, dimensions = costs(path)
        yield size, dimensions, detail


def request_cost(messages: list[dict[str, Any]], costs: ImageCosts) -> tuple[int, int]:
    """(image bytes, estimated prompt tokens) of one request."""
    text = sum(len(message_text(m.get("content"))) for m in messages)
    tokens, data = math.ceil(text / CHARS_PER_TOKEN), 0
    for size, (width, height), detail in request_images(messages, costs):
        data += size
        tokens += image_tokens(width, height, detail)
    return data, tokens


def plan_rollout(
    records: Iterable[PromptRecord], backend: Backend, cache: ReplyCache | None, config: RolloutConfig
) -> Plan:
    """Walk every (record, run) through its turns as far as the cache answers them."""
    params, repeats, max_turns = config.request.body, config.repeats, config.max_turns
    plan, hashes, costs = Plan(), ImageHashes(), ImageCosts(params.get("max_pixels"))
    use_cache = cache is not None and backend.cacheable
    for record in records:
        plan.rows += 1
        for run in range(repeats):
            plan.requests += 1
            plan.most_requests += max_turns
            conversation = list(record["messages"])
            for turn in range(max_turns):
                reply = (
                    cached_reply(cache, backend, conversation, params, run, turn, hashes)
                    if use_cache
                    else None
                )
                if reply is None:
                    plan.to_send += 1
                    plan.may_send += max_turns - turn - 1
                    try:
                        data, tokens = request_cost(conversation, costs)
                    except (ImageError, OSError):
                        plan.image_errors += 1
                    else:
                        plan.image_bytes += data
                        plan.prompt_tokens += tokens
                    break
                plan.cached += 1
                if has_answer(reply.content) or refusal_or_filtered(reply):
                    break
                conversation = next_turn(conversation, reply, config.templates)
    return plan


def cached_reply(
    cache: Any, backend: Backend, messages: list, params: dict, run: int, turn: int, hashes: ImageHashes
) -> Reply | None:
    """The cache's reply to this request, as the run would look it up (None: not there)."""
    try:
        key = request_key(
            backend=backend.name,
            model=backend.model,
            endpoint=backend.cache_scope,
            messages=messages,
            params=params,
            run=run,
            turn=turn,
            image_hash=hashes,
        )
    except OSError:
        return None
    found = cache.get(key)
    return None if found is None else Reply.from_json(found)


def plan_lines(
    plan: Plan, backend: Backend, repeats: int, max_turns: int, cache_path: Path | None
) -> list[str]:
    """The dry run's report, one figure per line."""
    from bv.core.stats import human_count

    turns = f"; up to {plan.most_requests} with `max_turns` {max_turns}" if max_turns > 1 else ""
    later = f" (and up to {plan.may_send} refinement turns)" if plan.may_send else ""
    where = f" at {backend.endpoint}" if backend.endpoint else ""
    if not backend.cacheable:
        cache_line = f"not used by the {backend.name} backend"
    elif cache_path is None:
        cache_line = "off (`no_cache`)"
    else:
        cache_line = f"{plan.cached} of these requests ({cache_path})"
    lines = [
        f"model:         {backend.model} ({backend.name}{where})",
        f"rows:          {plan.rows}",
        f"requests:      {plan.requests} ({counted(plan.rows, 'row')} × {counted(repeats, 'repeat')}{turns})",
        f"in the cache:  {cache_line}",
        f"to send:       {plan.to_send}{later}",
        f"image bytes:   {plan.image_bytes:,} ({plan.image_bytes / 1e6:.1f} MB, base64 as sent)",
        f"prompt tokens: ~{human_count(plan.prompt_tokens)} for the requests to send (estimate:"
        f" {CHARS_PER_TOKEN} characters per token of text, images by OpenAI's tile rule)",
    ]
    if plan.image_errors:
        failing = counted(plan.image_errors, "request")
        lines.append(f"unreadable:    {failing} whose images cannot be read would fail")
    return lines
